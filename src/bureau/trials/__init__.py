"""Trials: one attempt at one task, from sandbox start to reward, and many of them at once."""
