"""Memory: facts, decisions, conventions and pitfalls, proposed by agents, approved by people,
each linked to its evidence (see docs/memory.md)."""
