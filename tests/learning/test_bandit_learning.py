"""The small-scale overfit check that the pipeline learns at all.

A tiny random-weight Qwen3 with the real 151,936-token vocabulary plays a bandit: from one fixed
prompt it samples 4-token completions on the built-in engine, and the reward is 1 when a
completion contains a token of the chosen pattern (ids 1000-2999, about 1.3% of the vocabulary,
so a random policy succeeds about 5% of the time). Rewards alone must lift it above 0.8.

Each step is the whole loop on CPU: engine samples (with sampler logprobs and weight versions)
-> GRPO advantages per group -> token-mean weights -> PPO loss -> trainer step -> weights
pushed back into the engine in place. The sampler/trainer mismatch must stay near zero.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from bureau.algo.advantages import AdvantageConfig, compute_advantages
from bureau.algo.losses import PPOLossConfig, make_loss_fn
from bureau.inference.client import SamplingParams
from bureau.inference.engine import EngineConfig, InferenceEngine
from bureau.trainer.config import OptimizerConfig, TrainerConfig
from bureau.trainer.data import completions_to_batch
from bureau.trainer.trainer import Trainer

# <|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n
PROMPT = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]
PATTERN = range(1000, 3000)
GROUPS, GROUP_SIZE, COMPLETION = 4, 8, 4
MAX_STEPS = 100
LR = 3e-2


def reward(token_ids: list[int]) -> float:
    return float(any(t in PATTERN for t in token_ids))


def test_tiny_model_learns_a_bandit_from_rewards(tiny_model: Path) -> None:
    engine = InferenceEngine.from_checkpoint(
        tiny_model, EngineConfig(seed=0, max_model_len=64, cache_tokens=4096, page_size=16)
    )
    trainer = Trainer.from_pretrained(
        tiny_model,
        make_loss_fn(PPOLossConfig()),
        TrainerConfig(optimizer=OptimizerConfig(lr=LR), compute_entropy=False, seed=0),
    )
    advantage_config = AdvantageConfig(estimator="grpo")
    curve: list[float] = []
    mismatch: list[float] = []
    with engine:
        for step in range(MAX_STEPS):
            futures = [
                engine.submit(
                    PROMPT,
                    SamplingParams(max_tokens=COMPLETION, temperature=1.0, seed=step * 1000 + i),
                    ignore_eos=True,
                )
                for i in range(GROUPS * GROUP_SIZE)
            ]
            samples = [f.result(timeout=120) for f in futures]
            rewards = [reward(s.token_ids) for s in samples]
            curve.append(statistics.fmean(rewards))
            if len(curve) >= 3 and statistics.fmean(curve[-3:]) > 0.8:
                break
            groups = [i // GROUP_SIZE for i in range(len(samples))]
            result = compute_advantages(rewards, groups, advantage_config)
            keep = [i for i, a in enumerate(result.advantages) if a is not None]
            if not keep:
                continue
            batch = completions_to_batch(
                [PROMPT] * len(keep),
                [samples[i].token_ids for i in keep],
                [samples[i].logprobs for i in keep],
                [result.advantages[i] or 0.0 for i in keep],
                [groups[i] for i in keep],
                weight_version=trainer.step,
            )
            metrics = trainer.forward_backward(batch)
            mismatch.append(float(metrics["abs_logprob_diff"]))
            trainer.optim_step()
            state = trainer.export_weights()
            assert isinstance(state, dict)
            engine.update_weights(state, version=trainer.step)
    print("reward curve:", " ".join(f"{r:.2f}" for r in curve))
    print("sampler/trainer |Δ logprob| mean per step:", " ".join(f"{m:.1e}" for m in mismatch))
    assert statistics.fmean(curve[:2]) < 0.3, curve
    assert statistics.fmean(curve[-3:]) > 0.8, curve
    # On-policy: the engine and the trainer score the same weights the same way.
    assert max(mismatch) < 1e-3
