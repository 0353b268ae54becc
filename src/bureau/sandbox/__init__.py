"""Isolated sandboxes for trials: the runtime interface and its implementations."""
