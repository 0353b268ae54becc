"""Code tools: run Python or shell in the workspace, isolated from the tool server.

How the run is separated from the server (another uid when the server is root, its own session,
rlimits, no inherited environment or pipes, every leftover process killed afterwards) is
described in `bureau.tools.runner`. A run that exits, whatever its exit code, is a normal result
with its stdout, stderr and exit code; a run that outlives its timeout is killed with everything
it started and reported as a `timeout` error that carries the output so far.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated

from pydantic import Field

from bureau.tools.core import FailureKind, ToolFailure, ToolSet, Workspace
from bureau.tools.runner import RunResult, run_isolated

TOOLS = ToolSet("code", "code_")
TimeoutArg = Annotated[
    float | None,
    Field(gt=0, description="Seconds before the run is killed (default 60, at most 600)."),
]
_SIGNAL_HINTS = {
    signal.SIGKILL: "killed (SIGKILL), e.g. for using too much memory",
    signal.SIGXCPU: "stopped by the CPU time limit (SIGXCPU)",
    signal.SIGXFSZ: "stopped for writing a file over the size limit (SIGXFSZ)",
    signal.SIGSEGV: "crashed (SIGSEGV)",
}


def _timeout(ws: Workspace, timeout_s: float | None) -> float:
    asked = timeout_s or ws.settings.code_default_timeout_s
    return min(asked, ws.settings.code_max_timeout_s)


def _streams(result: RunResult) -> str:
    out = result.stdout if result.stdout else "(empty)"
    err = result.stderr if result.stderr else "(empty)"
    return f"--- stdout ---\n{out.rstrip()}\n--- stderr ---\n{err.rstrip()}"


def _report(ws: Workspace, result: RunResult, timeout_s: float) -> str:
    if result.timed_out:
        raise ToolFailure(
            FailureKind.timeout,
            f"the run did not finish within {timeout_s:g} s and was killed with every process "
            f"it started; pass a larger timeout_s (at most {ws.settings.code_max_timeout_s:g}) "
            f"if it needs longer. Output so far:\n{_streams(result)}",
        )
    code = result.exit_code
    if code < 0:
        try:
            sig = signal.Signals(-code)
            status = _SIGNAL_HINTS.get(sig, f"killed by signal {sig.name}")
        except ValueError:
            status = f"killed by signal {-code}"
    else:
        status = f"exit code {code}"
    # No uid and no timing here: they would make the same program's output (and so a recorded
    # trajectory, and a policy trained on it) differ from run to run (a lookup takes 0.3 s on
    # an idle machine, 4 s on a loaded one), and tell the agent nothing it needs.
    head = f"{status} (cwd {ws.root})"
    return f"{head}\n{_streams(result)}"


def _run(ws: Workspace, argv: list[str], stdin: bytes | None, timeout_s: float | None) -> str:
    limit = _timeout(ws, timeout_s)
    result = run_isolated(
        argv,
        cwd=ws.real_root(),
        settings=ws.settings,
        timeout_s=limit,
        stdin_data=stdin,
        max_chars=ws.settings.max_output_chars // 2,
    )
    return _report(ws, result, limit)


@TOOLS.tool(read_only=False, timeout_arg="timeout_s")
def code_run_python(
    ws: Workspace,
    code: Annotated[str, Field(min_length=1, description="A complete Python 3 program.")],
    timeout_s: TimeoutArg = None,
) -> str:
    """Run a Python 3 program with the workspace as its working directory and return its exit
    code, stdout and stderr. pandas, numpy, openpyxl, pdfplumber, pypdf, python-docx and
    python-pptx are installed. Each run is a fresh process (no state is kept between runs),
    has no network and no stdin, and everything it starts is killed when it ends; print what
    you need to see. Files it writes in the workspace stay."""
    python = ws.settings.code_python or sys.executable
    return _run(ws, [python, "-"], code.encode("utf-8"), timeout_s)


@TOOLS.tool(read_only=False, timeout_arg="timeout_s")
def code_run_shell(
    ws: Workspace,
    command: Annotated[
        str, Field(min_length=1, description="A shell command line or script (bash).")
    ],
    timeout_s: TimeoutArg = None,
) -> str:
    """Run a shell command (bash) with the workspace as its working directory and return its
    exit code, stdout and stderr. `python` is the interpreter with the document libraries.
    No network and no stdin; background processes are killed when the command ends."""
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    if len(command.encode()) > 100_000:
        raise ToolFailure(
            FailureKind.invalid_argument,
            "the command is over 100 kB; write a script file with fs_write_text and run that",
        )
    return _run(ws, [shell, "-c", command], None, timeout_s)


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["code"])
