"""From trajectory records to training batches: advantages, loss weights, the group stream."""

from __future__ import annotations

import pytest
import torch  # noqa: F401

from bureau.algo.advantages import AdvantageConfig
from bureau.algo.reductions import ReductionConfig
from bureau.records import TrajectoryRecord, TurnRecord
from bureau.trainer.data import (
    GroupStream,
    completions_to_batch,
    malformed_tokens,
    records_to_batch,
)
from bureau.trainer.synthetic import synthetic_records
from fixture_support import group_record as _record


def test_records_become_a_batch_with_advantages_and_weights() -> None:
    records = [
        _record("a", "g1", 1.0, 2),  # advantage +1 (GRPO: (1 - 0.5) / 0.5)
        _record("b", "g1", 0.0, 1),  # advantage -1
        _record("c", "g2", 1.0, 1),  # zero-variance group: excluded
        _record("d", "g2", 1.0, 1),
        _record("e", "g3", None, 1),  # no reward: its whole group goes (mask_group)
        _record("f", "g3", 0.0, 1),
    ]
    made = records_to_batch(records, AdvantageConfig(), ReductionConfig())
    assert made.batch is not None
    assert [r.trajectory_id for r in made.records] == ["a", "b"]
    assert made.batch.token_ids == [[1, 2, 3, 10, 11], [1, 2, 3, 10]]
    assert made.batch.loss_mask == [[0, 0, 0, 1, 1], [0, 0, 0, 1]]
    advantages = made.batch.advantages
    assert advantages[0] == pytest.approx([0, 0, 0, 1, 1], abs=1e-5)
    assert advantages[1] == pytest.approx([0, 0, 0, -1], abs=1e-5)
    third = 1 / 3  # token_mean over the batch's 3 sampled tokens
    assert made.batch.loss_weights == [
        pytest.approx([0, 0, 0, third, third]),
        pytest.approx([0, 0, 0, third]),
    ]
    assert made.batch.weight_versions == [[-1, -1, -1, 4, 4], [-1, -1, -1, 4]]
    assert made.excluded["zero_variance"] == 2
    assert made.excluded["masked"] == 1 and made.excluded["group_masked"] == 1
    assert made.mean_reward == pytest.approx(3 / 5)


def test_completions_become_a_batch_on_literal_ids() -> None:
    batch = completions_to_batch(
        prompts=[[1, 2, 3], [1, 2, 3], [7]],
        completions=[[10, 11], [12], [13, 14, 15]],
        sampler_logprobs=[[-0.5, -1.5], [-2.0], [-0.1, -0.2, -0.3]],
        advantages=[0.5, -0.5, 2.0],
        group_ids=["a", "a", "b"],
        weight_version=3,
    )
    assert batch.token_ids == [[1, 2, 3, 10, 11], [1, 2, 3, 12], [7, 13, 14, 15]]
    assert batch.loss_mask == [[0, 0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 1]]
    assert batch.sampler_logprobs[0] == [0.0, 0.0, 0.0, -0.5, -1.5]
    assert batch.advantages == [[0, 0, 0, 0.5, 0.5], [0, 0, 0, -0.5], [0, 2, 2, 2]]
    sixth = pytest.approx(1 / 6)  # token_mean over the 6 sampled tokens
    assert batch.loss_weights == [
        [0, 0, 0, sixth, sixth],
        [0, 0, 0, sixth],
        [0, sixth] + [sixth] * 2,
    ]
    assert batch.weight_versions == [[-1, -1, -1, 3, 3], [-1, -1, -1, 3], [-1, 3, 3, 3]]
    with pytest.raises(ValueError, match="2 completion ids but 1 logprobs"):
        completions_to_batch([[1]], [[2, 3]], [[-1.0]], [1.0], ["a"])


def test_a_stream_of_groups_reshuffles_each_pass_and_is_stateless() -> None:
    records = synthetic_records(num_groups=3, group_size=2, seed=0)
    stream = GroupStream(records, seed=5)
    first_pass = [r.group_id for r in stream.take(0, 3)]
    assert sorted(first_pass) == ["g0", "g0", "g1", "g1", "g2", "g2"]
    again = GroupStream(records, seed=5)
    assert [r.group_id for r in again.take(2, 3)] == [r.group_id for r in stream.take(2, 3)]
    second_pass = [r.group_id for r in stream.take(3, 3)]
    assert sorted(second_pass) == sorted(first_pass)


def _two_turns(tid: str, reward: float, malformed_first: bool) -> TrajectoryRecord:
    # prompt [1, 2, 3]; turn 1 samples [10, 11]; observation [4]; turn 2 samples [12]
    record = _record(tid, "g", reward, 3)
    record.token_ids = [1, 2, 3, 10, 11, 4, 12]
    record.loss_mask = [0, 0, 0, 1, 1, 0, 1]
    record.sampler_logprobs = [0.0, 0.0, 0.0, -1.0, -1.0, 0.0, -1.0]
    record.weight_versions = [-1, -1, -1, 4, 4, -1, 4]
    error = "tool call 1: invalid JSON" if malformed_first else None
    record.turns = [
        TurnRecord([10, 11], [-1.0, -1.0], [4, 4], "stop", "e", 0.0, [4], [], error),
        TurnRecord([12], [-1.0], [4], "stop", "e", 0.0),
    ]
    return record


def test_a_malformed_turn_gets_no_credit_for_a_success_it_did_not_earn() -> None:
    records = [_two_turns("pass", 1.0, True), _two_turns("fail", 0.0, True)]
    assert malformed_tokens(records[0]) == [0, 0, 0, 1, 1, 0, 0]
    made = records_to_batch(records, AdvantageConfig(), ReductionConfig())
    assert made.batch is not None
    passed, failed = made.batch.advantages
    assert passed == pytest.approx([0, 0, 0, 0, 0, 0, 1], abs=1e-5)  # the recovery, not the call
    assert failed == pytest.approx([0, 0, 0, -1, -1, 0, -1], abs=1e-5)  # the whole failure
    shared = records_to_batch(records, AdvantageConfig(malformed_turns="share"), ReductionConfig())
    assert shared.batch is not None
    assert shared.batch.advantages[0] == pytest.approx([0, 0, 0, 1, 1, 0, 1], abs=1e-5)


def test_a_record_whose_turns_do_not_match_its_tokens_gets_no_marks() -> None:
    record = _two_turns("x", 1.0, True)
    record.turns = record.turns[:1]
    assert malformed_tokens(record) == [0] * 7
