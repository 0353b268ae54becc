"""Bootstrapping a base policy from a scripted teacher, before RL.

A random tiny model cannot read a spreadsheet, so RL on it would see reward 0 forever. The
bootstrap gives it a starting point that is imperfect on purpose:

- `teacher.py` plans each turn of a *starter* task (one named file, one or two tool calls) from
  what a model sees (the instruction and the tool outputs so far), knowing the gold answer on
  the host; seeded mistakes (wrong file, wrong value, missing key, malformed call, giving up)
  make some trajectories fail the way a weak policy would.
- `scripted.py` turns the teacher into a `Sampler` and a trial agent, so its trajectories run
  through the real harness `Episode`, the real MCP tools in real sandboxes and the verifier,
  and are recorded token-exactly like a model's.
- `record.py` runs a dataset's tasks with it and writes the records as Parquet.
- `sft.py` trains a checkpoint on the records through the `Trainer` with the `sft` loss and
  writes a Hugging Face folder that `bureau serve` loads.
"""
