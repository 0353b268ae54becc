"""Bounded staleness: how many groups may be generating, and what a late group is worth.

Admission follows AReaL (Fu et al. 2025, "AReaL: A Large-Scale Asynchronous Reinforcement
Learning System for Language Reasoning", arXiv:2505.24298, Section 5.1): with B groups per step,
trainer version t and a bound eta, a new group may start only while

    capacity = (eta + t + 1) * B - (accepted + running) > 0

where `accepted` counts groups that entered the buffer (trained or still waiting) and `running`
the groups being generated. So at most (eta + 1) * B groups are ever ahead of the trainer, and
with eta = 0 generation stops while the trainer works on the batch: synchronous RL.

Groups that leave without an optimizer step (dropped as too stale, or in a batch that carried no
learning signal) give their slot back; otherwise the rule would count them against future
versions and could stall generation for good.

A long-tailed group admitted early can still finish after the trainer moved on more than eta
versions; the trainer checks each group's staleness when it takes it and applies the policy
(`drop` or `keep`), counting both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bureau.records import NOT_SAMPLED_VERSION


@dataclass
class Admission:
    """AReaL's admission rule, with the counters it needs (see the module docstring)."""

    groups_per_step: int
    max_staleness: int
    accepted: int = 0
    """Groups accepted into the buffer and not released (trained, or waiting)."""
    running: int = 0
    """Groups being generated."""

    def capacity(self, version: int) -> int:
        bound = (self.max_staleness + version + 1) * self.groups_per_step
        return bound - (self.accepted + self.running)

    def start(self) -> None:
        self.running += 1

    def finish(self, accepted: bool = True) -> None:
        """A running group ended: into the buffer, or abandoned (`accepted=False`)."""
        self.running -= 1
        if accepted:
            self.accepted += 1

    def release(self, groups: int = 1) -> None:
        """Groups that left the buffer without an optimizer step give their slots back."""
        self.accepted -= groups


def group_staleness(versions_per_trajectory: Sequence[Sequence[int]], trainer_version: int) -> int:
    """The group's staleness: the trainer version minus the oldest version of any sampled token
    (0 for a group without sampled tokens)."""
    sampled = [v for vs in versions_per_trajectory for v in vs if v != NOT_SAMPLED_VERSION]
    return trainer_version - min(sampled) if sampled else 0
