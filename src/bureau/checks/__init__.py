"""Dataset checks: grading oracle and empty answers."""
