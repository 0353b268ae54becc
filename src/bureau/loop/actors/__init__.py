"""Ray: where the loop's processes are placed. The only part of bureau (with the CLI) that
imports Ray.

- `remote`: the actors, thin shells around the plain objects of `bureau.loop.sides` and
  `bureau.loop.worker`: engines (the built-in engine with its HTTP server, or a vLLM server
  process), trainer ranks (one process, or FSDP2 ranks joined by torch.distributed: gloo on CPU,
  nccl on GPUs) and rollout workers.
- `ports`: the controller's ports over them. A rollout worker that dies raises `WorkerLost` for
  its trajectories (Ray restarts it); an engine that dies is restarted on the same port and gets
  the current weights again (`repair`).
- `cluster`: connecting to Ray and placing a run's actors in one placement group with their
  resources, so the same code asks for GPUs on a cluster. The trainer's and the engines'
  processes start side by side; the rollout workers, which need the engines' addresses, after.
- `probes`: the Ray tasks a run sends to a node (a free port, whether it sees the run's paths,
  where an actor landed), in a module as light as Ray itself: the worker process that runs one
  imports it (`remote` would cost it seconds of torch imports, twice a run).
"""
