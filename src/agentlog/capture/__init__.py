"""Capture: the hook entry, the agents' adapters, classifiers and redaction (standard library only: docs/hook-path.md)."""
