"""A team's history on object storage: this machine's events and derived tables published
to shared Delta tables (``s3://`` or ``file://``), queried with DuckDB or Daft (locally or
on a Ray cluster). See docs/team.md."""

from __future__ import annotations

from agentlog.core import AgentlogError, UsageError


class TeamError(AgentlogError):
    """A team table cannot be reached, read or written (the message says which and why)."""


class TeamUsageError(TeamError, UsageError):
    """A team URL or endpoint setting that cannot be used (exit 2)."""


class TeamExtraMissing(TeamError):
    """An optional part (daft, ray, boto3) is not installed."""


def need(module: str, what: str) -> None:
    """Raise TeamExtraMissing naming the install command when ``module`` cannot be imported."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise TeamExtraMissing(f"{what} needs the team extra: pip install 'agentlog[team]' ({module} is not installed)")


__all__ = ["TeamError", "TeamExtraMissing", "TeamUsageError", "need"]
