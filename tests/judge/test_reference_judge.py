"""The reference-matching judge: its rule by hand, and through the real judge client."""

from __future__ import annotations

import asyncio

import pytest

from bureau.judge import JudgeClient, JudgeConfig, JudgeRequest
from bureau.judge.reference import ReferenceJudgeServer, grade, reference_terms


def user_message(reference: str, work: str) -> str:
    request = JudgeRequest(question="Is the memo right?", reference=reference, work=work)
    return request.messages()[1]["content"]


def test_every_number_and_name_of_the_reference_must_be_in_the_work() -> None:
    reference = "Notice period 90 days; deadline 2026-03-31; fee 1,250,000 to Harlow Partners."
    assert reference_terms(reference) == sorted(
        ["notice", "90", "2026", "03", "31", "1250000", "harlow partners"]
    )
    work = "The notice runs 90 days to 2026-03-31. Harlow Partners gets 1250000."
    assert grade(user_message(reference, work))["passed"] is True
    verdict = grade(user_message(reference, "The notice runs 60 days to 2026-03-31."))
    assert verdict["passed"] is False and "90" in verdict["rationale"]
    assert grade("no structure at all")["passed"] is False


def test_the_client_gets_verdicts_from_it() -> None:
    async def main() -> list[bool]:
        with ReferenceJudgeServer() as server:
            async with JudgeClient(JudgeConfig(url=server.url, model="ref"), keys=["k"]) as judge:
                asks = [
                    JudgeRequest(question="q", reference="Total 42", work=work)
                    for work in ("the total is 42", "the total is 41")
                ]
                return [(await judge.judge(ask)).passed for ask in asks]

    assert asyncio.run(main()) == [True, False]


def test_workers_sharing_keys_split_every_limit() -> None:
    config = JudgeConfig(url="http://x/v1", model="m", rpm_per_key=40, tpm_per_key=90_000)
    part = config.share(3)
    assert (part.rpm_per_key, part.tpm_per_key, part.max_concurrency) == (13, 30_000, 2)
    assert 3 * part.rpm_per_key <= 40 and 3 * part.tpm_per_key <= 90_000
    one = JudgeConfig(url="http://x/v1", model="m", rpm_per_key=8, max_concurrency=1).share(8)
    assert (one.rpm_per_key, one.tpm_per_key, one.max_concurrency) == (1, None, 1)
    with pytest.raises(ValueError, match="rpm_per_key = 2 cannot be split among 8 workers"):
        JudgeConfig(url="http://x/v1", model="m", rpm_per_key=2).share(8)
