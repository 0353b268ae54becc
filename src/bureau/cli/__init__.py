"""The `bureau` command line."""
