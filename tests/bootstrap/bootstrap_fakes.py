"""A register-lookup task as the teacher sees it, and tools that answer it from memory."""

from __future__ import annotations

from typing import Any

from bureau.bootstrap.teacher import Criterion, TaskView
from bureau.harness.loop import ToolOutput
from bureau.harness.render import Message, tool_schema

INSTRUCTION = """# Register lookup: C-107

Look up contract C-107 in `contracts/contract_register.xlsx`. Who is the counterparty, and what
is the contract's annual value?

## Answer keys

Write `output/answer.json` with these keys:

- `counterparty`: string, the counterparty's name
- `annual_value`: number, annual value in USD
"""

SHEET = """contracts/contract_register.xlsx, sheet 'Register', A1:C3
|  | A | B | C |
|---|---|---|---|
| 1 | Contract ID | Counterparty | Annual Value (USD) |
| 2 | C-103 | Petrov Analytics | 1075000 |
| 3 | C-107 | Castillo Systems | 2010000 |"""


def register_task() -> TaskView:
    return TaskView(
        name="bureau/train-law-000-t03",
        instruction=INSTRUCTION,
        criteria=[
            Criterion("counterparty", "text", "Castillo Systems"),
            Criterion("annual_value", "numeric", 2010000, 0.001, 0.01),
        ],
        workspace_files=["contracts/contract_register.xlsx", "mail/inbox/2025-01-02_hello.eml"],
    )


class RegisterTools:
    """`ToolBackend` with the two tools of the task; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def specs(self) -> list[Message]:
        path = {"type": "object", "properties": {"path": {"type": "string"}}}
        return [
            tool_schema("sheet_read", "Read a sheet.", path),
            tool_schema("fs_write_text", "Write a text file.", path),
        ]

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutput:
        self.calls.append((name, arguments))
        if name == "sheet_read" and arguments.get("path") == "contracts/contract_register.xlsx":
            return ToolOutput(SHEET, False)
        if name == "fs_write_text":
            return ToolOutput(f"created {arguments['path']}", False)
        return ToolOutput("not_found: no such file", True)
