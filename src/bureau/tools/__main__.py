"""`python -m bureau.tools`: serve tool groups over stdio (see `bureau.tools.cli`)."""

from bureau.tools.cli import main

main()
