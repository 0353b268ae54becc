"""Adapters that let other tools run bureau's sandboxes and tasks (Harbor: `.harbor`).

Each adapter imports its tool only when the adapter module itself is imported, so this package
imports without any of them.
"""
