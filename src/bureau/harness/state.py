"""The harness's token state: three parallel, append-only lists and the sampling versions.

`token_ids`, `loss_mask` (1 for sampled ids) and `sampler_logprobs` (the engine's logprob for
sampled ids, 0.0 elsewhere), plus the weight version of every sampled id (`NOT_SAMPLED_VERSION`
elsewhere). The prompt is the first observation.

    ob=[1, 2, 3] ac=[10, 11]  ->  token_ids=[1, 2, 3, 10, 11]  loss_mask=[0, 0, 0, 1, 1]

When the episode ends the lists are copied into a `bureau.records.TrajectoryRecord`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bureau.records import NOT_SAMPLED_VERSION


@dataclass
class TokenState:
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sampler_logprobs: list[float] = field(default_factory=list)
    weight_versions: list[int] = field(default_factory=list)

    def observe(self, ids: Sequence[int]) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.sampler_logprobs.extend([0.0] * len(ids))
        self.weight_versions.extend([NOT_SAMPLED_VERSION] * len(ids))

    def sample(
        self, ids: Sequence[int], logprobs: Sequence[float], versions: Sequence[int]
    ) -> None:
        if not len(ids) == len(logprobs) == len(versions):
            raise ValueError(f"{len(ids)} ids, {len(logprobs)} logprobs, {len(versions)} versions")
        self.token_ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.sampler_logprobs.extend(logprobs)
        self.weight_versions.extend(versions)

    def __len__(self) -> int:
        return len(self.token_ids)
