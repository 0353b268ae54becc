"""One rank of the FSDP2 agreement test (run under torchrun by test_fsdp_agreement.py).

Trains one step on a fixed synthetic batch and writes, from rank 0: the full gradients after
`forward_backward`, the parameters after `optim_step`, logprobs computed then, and the
metrics. Then it checks that a checkpoint saved after that step resumes to the same next step,
exports the weights, and takes a step on a batch too small to give both ranks work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from bureau.trainer import Parallel, Trainer, TrainerConfig
from bureau.trainer.fsdp import full_tensor, named_parameters
from bureau.trainer.synthetic import reinforce_loss, synthetic_batch


def main(model_dir: Path, out: Path, config_json: str, lengths: list[int]) -> None:
    parallel = Parallel.from_env()
    config = TrainerConfig.model_validate_json(config_json)
    trainer = Trainer.from_pretrained(model_dir, reinforce_loss, config, parallel=parallel)
    batch = synthetic_batch(lengths, seed=1)
    metrics = trainer.forward_backward(batch)
    grads = {n: full_tensor(p.grad) for n, p in trainer.model.named_parameters()}
    metrics |= trainer.optim_step()
    params = dict(named_parameters(trainer.model))
    scored = trainer.compute_logprobs(synthetic_batch(lengths, seed=3))
    trainer.save(out / "checkpoint")
    trainer.forward_backward(synthetic_batch(lengths, seed=2))
    trainer.optim_step()
    after = dict(named_parameters(trainer.model))
    trainer.load(out / "checkpoint")
    trainer.forward_backward(synthetic_batch(lengths, seed=2))
    trainer.optim_step()
    resumed = dict(named_parameters(trainer.model))
    exported = trainer.export_weights(out / "export")
    # One sequence: one micro-batch, so the other rank runs an empty filler.
    filler = trainer.forward_backward(synthetic_batch([7], seed=4))
    filler |= trainer.optim_step()
    if parallel.is_main:
        torch.save({"grads": grads, "params": params, "scored": scored}, out / "fsdp.pt")
        identical = all(torch.equal(after[n], resumed[n]) for n in after)
        (out / "metrics.json").write_text(
            json.dumps(
                {
                    "metrics": metrics,
                    "filler": filler,
                    "resume_identical": identical,
                    "export": str(exported),
                }
            )
        )
    trainer.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))
