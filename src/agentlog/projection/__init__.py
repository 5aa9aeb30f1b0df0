"""Projection: sessions, turns, tool calls, attempts, causes, work units — derived from events."""
