"""The source of truth: one hash-chained, append-only log per session (docs/log-format.md)."""
