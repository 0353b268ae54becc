"""Command line of the tool servers: parse first, then import MCP and the document libraries.

    python -m bureau.tools [--groups a,b] [--workspace DIR] [--max-output-chars N]
                           [--call-timeout-s S] [--code-uid UID|none] [--code-python PATH]
    python -m bureau.tools.pdf [same flags]     # one group

The workspace defaults to `$BUREAU_WORKSPACE`, else `/workspace`. The server speaks MCP over
stdin/stdout and logs warnings only, to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from bureau.tools import GROUPS

DEFAULT_WORKSPACE = "/workspace"


def _groups(text: str) -> list[str]:
    names = [g.strip() for g in text.split(",") if g.strip()]
    unknown = [g for g in names if g not in GROUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown group(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(GROUPS)}"
        )
    return names


def _uid(text: str) -> int | None:
    return None if text.lower() in {"none", "same", ""} else int(text)


def parser(default_groups: Sequence[str] | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bureau.tools",
        description="Serve bureau's MCP tool groups over stdio for one workspace.",
    )
    p.add_argument(
        "--groups",
        type=_groups,
        default=list(default_groups or GROUPS),
        help=f"comma-separated groups (default: all of {','.join(GROUPS)})",
    )
    p.add_argument(
        "--workspace",
        type=Path,
        default=Path(os.environ.get("BUREAU_WORKSPACE") or DEFAULT_WORKSPACE),
        help="workspace root (default: $BUREAU_WORKSPACE or /workspace)",
    )
    p.add_argument("--max-output-chars", type=int, default=20_000)
    p.add_argument("--call-timeout-s", type=float, default=60.0)
    p.add_argument(
        "--code-uid",
        type=_uid,
        default=_uid(os.environ.get("BUREAU_CODE_UID") or "65534"),
        help="uid the code tools run code as, when the server may switch to it "
        "(default: $BUREAU_CODE_UID, set by bureau's sandbox, else 65534; 'none': same uid)",
    )
    p.add_argument("--code-python", default="", help="interpreter for code_run_python")
    p.add_argument("--code-memory-mb", type=int, default=4096)
    p.add_argument("--name", default="bureau-tools", help="server name reported to clients")
    return p


def drop_writable_paths(workspace: Path) -> None:
    """Take the working directory and anything inside the workspace off `sys.path` (`python -m`
    puts the working directory first): tools import some libraries late, and a module the agent
    wrote into the workspace must never be what they import."""
    cwd, root = Path.cwd().resolve(), workspace.resolve()

    def writable(entry: str) -> bool:
        path = Path(entry or ".").resolve()
        return path == cwd or (root != Path("/") and path.is_relative_to(root))

    sys.path[:] = [entry for entry in sys.path if not writable(entry)]


def main(argv: Sequence[str] | None = None, *, default_groups: Sequence[str] | None = None) -> None:
    args = parser(default_groups).parse_args(argv)
    drop_writable_paths(args.workspace)
    from bureau.tools.core import ToolSettings, Workspace
    from bureau.tools.server import serve

    settings = ToolSettings(
        max_output_chars=args.max_output_chars,
        call_timeout_s=args.call_timeout_s,
        code_uid=args.code_uid,
        code_python=args.code_python,
        code_memory_mb=args.code_memory_mb,
    )
    workspace = Workspace(args.workspace.absolute(), settings)
    try:
        serve(args.groups, workspace, name=args.name)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
