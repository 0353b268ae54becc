"""Exports: Parquet round trip (exact logprobs) and the ATIF document's shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bureau.harness.export import to_atif
from bureau.records import TrajectoryRecord, read_parquet, write_parquet


def test_parquet_round_trip_is_exact(
    tmp_path: Path, make_record: Callable[..., TrajectoryRecord]
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [make_record("a"), make_record("b", reward=None)]
    path = tmp_path / "run" / "trajectories.parquet"
    assert write_parquet(records, path) == 2
    assert read_parquet(path) == records
    table = pq.read_table(path)
    assert table.num_rows == 2
    assert table.column("num_sampled_tokens").to_pylist() == [3, 3]
    assert table.column("reward").to_pylist() == [1.0, None]
    assert table.schema.field("sampler_logprobs").type.value_type == pa.float64()


def test_atif_document(make_record: Callable[..., TrajectoryRecord]) -> None:
    doc = to_atif(make_record())
    assert doc["schema_version"] == "ATIF-v1.6"
    steps = doc["steps"]
    assert [s["step_id"] for s in steps] == [1, 2, 3, 4]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent"]
    call_step = steps[2]
    assert call_step["tool_calls"][0]["function_name"] == "fs_list"
    assert call_step["observation"]["results"] == [
        {"source_call_id": "call_1_0", "content": "a.pdf"}
    ]
    assert call_step["metrics"]["completion_token_ids"] == [10, 11]
    assert call_step["reasoning_content"] == "hm"
    assert doc["final_metrics"]["total_completion_tokens"] == 3
    assert doc["final_metrics"]["extra"]["stop_reason"] == "answered"
    json.dumps(doc)  # JSON-ready


def test_the_harness_asks_for_the_tool_groups_of_its_tools_and_the_answer_file() -> None:
    from bureau.harness.agent import harness_tool_groups
    from bureau.harness.loop import HarnessConfig

    assert harness_tool_groups(HarnessConfig()) is None  # every tool: every group
    assert harness_tool_groups(HarnessConfig(tool_prefixes=["code_run_python"])) == [
        "filesystem",
        "code",
    ]
    assert harness_tool_groups(HarnessConfig(tool_prefixes=["sheet_read"])) == [
        "filesystem",
        "spreadsheet",
    ]
