"""Audits of stored runs: checks that what was trained on is what was sampled."""
