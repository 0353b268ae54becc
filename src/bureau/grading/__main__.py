"""Run the grading CLI: `python -m bureau.grading --rubric R --workspace W --out V`."""

import sys

from .cli import main

sys.exit(main())
