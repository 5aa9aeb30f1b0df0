"""Importing agents' transcripts and other tools' histories into the log (see docs/import.md)."""
