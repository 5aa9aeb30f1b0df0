"""Answering questions, read-only: the DuckDB engine, AttemptQL, time travel and explanations (state/), usage."""
