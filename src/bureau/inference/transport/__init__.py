"""How new weights travel from the trainer to the engines; each engine's `WeightSync`
(`bureau.inference.control`) then loads them in its one update cycle.

- `disk`: a safetensors folder per version that each engine loads (vLLM, `url` engines, and
  built-in engines when asked); old folders are removed once newer ones are loaded.
- `broadcast`: a gloo (CPU) or nccl (GPU) group from trainer rank 0 to every built-in engine,
  bit-exact bytes in buckets.
- object store: the state dict put into Ray's object store once and read by each engine actor;
  it is Ray's own, so it lives with the actors (`bureau.loop.actors.ports.RayWeights`).
"""
