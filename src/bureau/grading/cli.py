"""The verifier entry point: `python -m bureau.grading --rubric R --workspace W --out V`.

A task's `tests/test.sh` runs this (usually from the self-contained `grader.pyz`). Exit status
0 means grading ran, whatever the score, and `V/reward.json` holds the reward, or, when the
rubric has judge criteria, `V/judge-requests.json` holds the questions for the judge that the
trial's runner asks. Exit status 2 means the verifier itself could not grade (bad rubric,
missing workspace): the message goes to stderr and no reward.json is written, because a
verifier error must never be recorded as a zero reward.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .grader import grade, write_outputs
from .rubric import RubricError, load_rubric

EXIT_OK = 0
EXIT_VERIFIER_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the grading CLI."""
    parser = argparse.ArgumentParser(
        prog="python -m bureau.grading",
        description="Grade an agent workspace against a bureau rubric and write reward.json.",
    )
    parser.add_argument("--rubric", type=Path, required=True, help="path to tests/rubric.json")
    parser.add_argument(
        "--workspace", type=Path, required=True, help="the agent's workspace directory"
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="verifier output directory for reward.json"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grading CLI and return its exit status."""
    args = build_parser().parse_args(argv)
    try:
        rubric = load_rubric(args.rubric)
        report = grade(rubric, args.workspace)
    except RubricError as exc:
        return _verifier_error(str(exc))
    except (FileNotFoundError, NotADirectoryError) as exc:
        return _verifier_error(f"workspace {args.workspace} is not a directory: {exc}")
    write_outputs(report, args.out)
    return EXIT_OK


def _verifier_error(message: str) -> int:
    print(f"bureau.grading: error: {message}", file=sys.stderr)
    print("bureau.grading: no reward written (verifier error, not a score)", file=sys.stderr)
    return EXIT_VERIFIER_ERROR
