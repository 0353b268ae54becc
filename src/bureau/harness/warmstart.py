"""Warm start: teach a tiny random-weight model the harness's tool-call format.

A random model never writes `<tool_call>`, so its trajectories end after one turn and nothing
multi-turn can be exercised on a laptop. This fits it, by supervised fine-tuning on the sampled
positions only, to scripted demonstrations rendered by the harness itself (the same renderer,
observation tokens and loss mask as real trajectories): list the folder, read a file, write
`output/answer.json`, then answer. Sampled at temperature 1 afterwards, the model makes
multi-turn trajectories with real tool calls, plus the occasional malformed call, unknown tool
or rambling turn, which is what the harness and the audit should see. It is a test fixture and
a CPU smoke-run policy, not a way to get a good agent (`bureau.bootstrap` makes the base policy
for RL). Training runs through the `Trainer` with the `sft` loss, like the bootstrap's.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bureau.harness.loop import Episode, HarnessConfig, ToolOutput
from bureau.harness.render import Message, Renderer
from bureau.inference.client import Completion, SamplingParams

ANSWER = "output/answer.json"


def script_for(files: Sequence[str], rng: random.Random) -> list[tuple[str, str]]:
    """(assistant turn, tool output) pairs for one demonstration; the last turn has no call."""
    target = rng.choice(list(files)) if files else "README.txt"
    answer = json.dumps({"answer": rng.randint(1, 999)})

    def call(name: str, arguments: dict[str, Any]) -> str:
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"

    listing = "\n".join(f"{f}  (file)" for f in files) or "(empty folder)"
    return [
        (call("fs_list", {"path": "."}), listing),
        (call("fs_read_text", {"path": target}), f"{target}: 1-40 of 120 lines\n..."),
        (
            call("fs_write_text", {"path": ANSWER, "content": answer, "mode": "overwrite"}),
            f"created {ANSWER}: {len(answer)} bytes, 1 lines",
        ),
        ("I have written my answer to output/answer.json.", ""),
    ]


class _Replay:
    """A sampler that returns the scripted turns, encoded, each closed by `<|im_end|>`."""

    def __init__(self, renderer: Renderer, turns: Sequence[str]) -> None:
        self.renderer = renderer
        self.turns = list(turns)

    async def complete(
        self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None
    ) -> Completion:
        ids = [*self.renderer.encode(self.turns.pop(0)), self.renderer.im_end_id]
        n = len(ids)
        return Completion(ids, [0.0] * n, "stop", [0] * n)


class _CannedTools:
    def __init__(self, specs: list[Message], outputs: Sequence[str]) -> None:
        self._specs = specs
        self.outputs = list(outputs)

    def specs(self) -> list[Message]:
        return self._specs

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutput:
        return ToolOutput(self.outputs.pop(0), False)


def demonstration(
    renderer: Renderer,
    specs: list[Message],
    instruction: str,
    script: list[tuple[str, str]],
    config: HarnessConfig,
) -> tuple[list[int], list[int]]:
    """Token ids and loss mask of the scripted trajectory, exactly as the harness lays them out."""
    episode = Episode(
        _Replay(renderer, [turn for turn, _ in script]),
        renderer,
        _CannedTools(specs, [out for _, out in script[:-1]]),
        config.model_copy(update={"max_turns": len(script) + 1}),
        task_name="demo",
        model="demo",
    )
    record = asyncio.run(episode.run(instruction))
    if record.stop_reason != "answered":
        raise RuntimeError(f"demonstration stopped with {record.stop_reason}")
    return record.token_ids, record.loss_mask


DEFAULT_TOOLS = ("fs_list", "fs_read_text", "fs_write_text")
"""The tools of the demonstrations; runs of a warm-started model must expose the same ones."""


def warm_start(
    model_dir: Path,
    out: Path,
    task_dirs: Sequence[Path],
    *,
    tools: Sequence[str] = DEFAULT_TOOLS,
    steps: int = 120,
    lr: float = 5e-3,
    seed: int = 0,
    log: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Fit the checkpoint in `model_dir` to one demonstration per task folder, with the MCP
    tools named by `tools` (prefixes) in the prompt, and save it (with its tokenizer) to
    `out`. Returns the losses."""
    from transformers import AutoTokenizer

    from bureau.algo.losses import SFTLossConfig, make_loss_fn
    from bureau.bootstrap.sft import export, fit
    from bureau.trainer.config import OptimizerConfig, TrainerConfig
    from bureau.trainer.trainer import Trainer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    config = HarnessConfig(tool_prefixes=list(tools))
    specs = local_tool_specs(tools)
    renderer = Renderer(tokenizer, enable_thinking=config.enable_thinking)
    rng = random.Random(seed)
    demos = [
        demonstration(renderer, specs, instruction, script_for(files, rng), config)
        for instruction, files in task_examples(task_dirs)
    ]
    trainer_config = TrainerConfig(
        optimizer=OptimizerConfig(lr=lr), compute_entropy=False, seed=seed
    )
    trainer = Trainer.from_pretrained(model_dir, make_loss_fn(SFTLossConfig()), trainer_config)
    losses: list[float] = []

    def on_step(metrics: dict[str, Any]) -> None:
        losses.append(float(metrics["train/loss"]))
        if log is not None:
            log(len(losses) - 1, losses[-1])

    try:
        fit(trainer, demos, steps=steps, per_step=1, seed=seed, on_step=on_step)
        export(trainer, model_dir, out)
    finally:
        trainer.close()
    return losses


def local_tool_specs(prefixes: Sequence[str] | None = None) -> list[Message]:
    """bureau's MCP tools (as listed by an in-process server), optionally only some prefixes."""
    import tempfile

    from bureau.harness.render import tool_schema
    from bureau.tools import GROUPS
    from bureau.tools.core import Workspace
    from bureau.tools.server import build_server

    with tempfile.TemporaryDirectory() as root:
        tools = asyncio.run(build_server(list(GROUPS), Workspace(Path(root))).list_tools())
    return [
        tool_schema(t.name, t.description, dict(t.input_schema))
        for t in tools
        if prefixes is None or t.name.startswith(tuple(prefixes))
    ]


def task_examples(task_dirs: Sequence[Path]) -> list[tuple[str, list[str]]]:
    """(instruction, workspace file names) of each task folder."""
    from bureau.tasks.taskdir import load_task_dir

    examples = []
    for folder in task_dirs:
        task = load_task_dir(folder)
        workspace = folder / "environment" / "workspace"
        files = sorted(
            str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file()
        ) if workspace.is_dir() else []  # fmt: skip
        examples.append((task.instruction, files))
    return examples
