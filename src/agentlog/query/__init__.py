"""Answering questions about the store: the SQL engine and (later) the statement language."""
