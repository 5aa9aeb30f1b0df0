"""What a question is about: a project, a session, a time window, a row limit.

Every people's command and the MCP tools take the same scope. With no
project named, the scope is the project of the working directory (the git
work tree it is in, else the directory), or every project when nothing was
recorded there. ``Scope.where`` renders it as a SQL condition with bound
parameters (values are never spliced into SQL text).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from agentlog.projection.ids import project_id as derive_project_id
from agentlog.projection.ids import split_display


@dataclass
class Scope:
    project_ids: list[str] | None = None
    """Projects in scope (None: every project)."""
    project_label: str | None = None
    """How the project was chosen, for messages (``parser-project (current directory)``)."""
    session: str | None = None
    """A session id, bare or ``ses_``-prefixed, or an unambiguous prefix."""
    since_us: int | None = None
    until_us: int | None = None
    limit: int | None = None
    offset: int = 0
    """Rows skipped before the first (a page of a listing)."""
    notes: list[str] = field(default_factory=list)

    def where(self, time_column: str | None, *, project_column: str = "project_id",
              session_column: str | None = "session_id") -> tuple[str, list[Any]]:
        """``(condition, parameters)`` for a table with these columns (``TRUE`` when unscoped)."""
        parts: list[str] = []
        params: list[Any] = []
        if self.project_ids is not None and project_column:
            parts.append(f"{project_column} IN ({', '.join('?' for _ in self.project_ids)})"
                         if self.project_ids else "FALSE")
            params.extend(self.project_ids)
        if self.session and session_column:
            parts.append(f"starts_with({session_column}, ?)")
            params.append(split_display(self.session)[1])
        if self.since_us is not None and time_column:
            parts.append(f"{time_column} >= make_timestamptz(?)")
            params.append(self.since_us)
        if self.until_us is not None and time_column:
            parts.append(f"{time_column} < make_timestamptz(?)")
            params.append(self.until_us)
        return (" AND ".join(parts) if parts else "TRUE"), params


def current_project(cwd: str | None = None) -> tuple[str, str] | None:
    """``(project_id, name)`` of the working directory's project."""
    from agentlog.capture.project import project_info

    info = project_info(cwd or os.getcwd())
    if info is None:
        return None
    return derive_project_id(info["root"], info.get("remote")), str(info["name"])


def resolve_projects(engine: Any, project: str | None, all_projects: bool, cwd: str | None = None) -> Scope:
    """The scope's projects: ``project`` (a name, an id or a prefix, a path), else
    the working directory's project when anything was recorded in it, else all."""
    scope = Scope()
    if all_projects:
        scope.project_label = "all projects"
        return scope
    rows = engine.run("SELECT DISTINCT project_id, project_name, project_root FROM sessions").rows
    if project:
        wanted = project.strip()
        bare = split_display(wanted)[1]
        path = os.path.abspath(wanted) if os.sep in wanted or wanted in (".", "..") else None
        ids = sorted({r[0] for r in rows if r[1] == wanted or r[0].startswith(bare) or (path and r[2] == path)})
        scope.project_ids = ids
        scope.project_label = wanted
        if not ids:
            scope.notes.append(f"no recorded project matches {wanted!r}")
        return scope
    here = current_project(cwd)
    if here is not None and any(r[0] == here[0] for r in rows):
        scope.project_ids = [here[0]]
        scope.project_label = f"{here[1]} (current directory)"
        elsewhere = engine.run("SELECT count(*) FROM sessions WHERE project_id IS DISTINCT FROM ? AND NOT retracted",
                               params=[here[0]]).rows[0][0]
        if elsewhere:
            scope.notes.append(f"showing {here[1]}, the current directory's project; {elsewhere} session"
                               f"{'s' if elsewhere != 1 else ''} of other projects not shown (--all-projects)")
        return scope
    scope.project_label = "all projects"
    if here is not None:
        scope.notes.append(f"nothing recorded in {here[1]}; showing all projects (--project to choose one)")
    return scope
