"""Suggestions from recorded activity, without any model call: proposals with evidence.

Two rules over the projection (SQL on the store):

- **procedure** — in one session, a shell command kept failing (at least
  :data:`MIN_FAILURES` failures of the same program — ``python -m pytest``,
  ``npm test`` and ``cargo build`` each count as one program) and then the
  same program succeeded with other arguments: "how to run X" is the command that
  worked; the evidence is the failed calls and the one that worked.
- **pitfall** — edits or writes of one file failed at least
  :data:`MIN_FAILURES` times with the same failure class: "what fails and how
  to avoid it", with the failed calls as evidence.

Each suggestion is a proposal (actor ``agent``) a person approves or rejects;
one whose title a memory or a proposal already has is not suggested again.
"""

from __future__ import annotations

from typing import Any, Final

MIN_FAILURES: Final = 2
MAX_EVIDENCE: Final = 5

#: programs whose first argument names what is run (``npm test``, ``cargo build``); ``python -m X`` is ``X``'s too
_RUNNERS: Final = "('npm', 'npx', 'pnpm', 'yarn', 'bun', 'bunx', 'uv', 'uvx', 'poetry', 'cargo', 'go', 'make', 'just', " \
    "'docker', 'kubectl', 'terraform', 'dotnet', 'mvn', 'gradle', './gradlew', 'bundle', 'rake')"
_PROCEDURES: Final = f"""
WITH shell AS (
  SELECT tc.tool_call_id, tc.session_id, tc.project_name, tc.started_at, tc.outcome_status, tc.attempt_id,
         trim(json_extract_string(e.content, '$.command')) AS command
  FROM tool_calls tc JOIN events e ON e.event_id = tc.start_event_id
  WHERE tc.tool_category = 'shell' AND tc.outcome_status IN ('success', 'failure')
), prog AS (
  SELECT *, CASE
      WHEN split_part(command, ' ', 2) = '-m' THEN concat_ws(' ', split_part(command, ' ', 1), '-m',
                                                               split_part(command, ' ', 3))
      WHEN split_part(command, ' ', 1) IN {_RUNNERS} AND split_part(command, ' ', 2) NOT LIKE '-%'
        THEN concat_ws(' ', split_part(command, ' ', 1), split_part(command, ' ', 2))
      ELSE split_part(command, ' ', 1) END AS program
  FROM shell WHERE command IS NOT NULL AND command != ''
), first_win AS (
  SELECT session_id, program, min(started_at) AS won_at FROM prog WHERE outcome_status = 'success'
  GROUP BY 1, 2
)
SELECT w.session_id, w.program, any_value(f.project_name),
       (SELECT command FROM prog s WHERE s.session_id = w.session_id AND s.program = w.program
          AND s.started_at = w.won_at AND s.outcome_status = 'success' LIMIT 1) AS worked,
       (SELECT tool_call_id FROM prog s WHERE s.session_id = w.session_id AND s.program = w.program
          AND s.started_at = w.won_at AND s.outcome_status = 'success' LIMIT 1) AS worked_call,
       list(f.command ORDER BY f.started_at) AS failed, list(f.tool_call_id ORDER BY f.started_at) AS failed_calls
FROM first_win w JOIN prog f ON f.session_id = w.session_id AND f.program = w.program
  AND f.outcome_status = 'failure' AND f.started_at < w.won_at
GROUP BY w.session_id, w.program, w.won_at
HAVING count(*) >= {MIN_FAILURES}
ORDER BY w.won_at
"""

_PITFALLS: Final = f"""
SELECT project_name, path_relative, outcome_class, count(*) AS failures,
       list(tool_call_id ORDER BY started_at) AS calls, count(DISTINCT session_id) AS sessions
FROM tool_calls
WHERE tool_category IN ('file_edit', 'file_write') AND outcome_status = 'failure'
  AND path_relative IS NOT NULL AND outcome_class IS NOT NULL
GROUP BY 1, 2, 3
HAVING count(*) >= {MIN_FAILURES}
ORDER BY failures DESC, 2
"""

_AVOID: Final = {
    "string_mismatch": "read the file again right before editing it: the text to replace has changed",
    "file_not_found": "check the path first (list the directory); it may have moved",
    "permission_denied": "check the file's permissions, or whether a tool or sandbox forbids writing there",
}


def suggestions(root: str) -> list[dict[str, Any]]:
    """The suggested proposals: ``{"title", "note", "changes"}`` each, not yet opened."""
    from agentlog.memory.service import current_engine

    engine = current_engine(root)
    out: list[dict[str, Any]] = []
    with engine:
        for session, program, project, worked, worked_call, failed, failed_calls in engine.run(_PROCEDURES).rows:
            if not worked or worked in failed:
                continue
            title = f"How to run {program}" + (f" in {project}" if project else "")
            evidence = [{"type": "tool_call", "value": c, "note": "failed"} for c in failed_calls[-MAX_EVIDENCE + 1:]]
            evidence.append({"type": "tool_call", "value": worked_call, "note": "worked"})
            out.append({"title": title, "note": f"{len(failed)} failed tries of {program}, then `{worked}` worked",
                        "changes": [{"op": "create", "kind": "procedure", "title": title,
                                     "content": "Tried before it worked:\n\n" + "\n".join(f"- `{c}`" for c in failed),
                                     "attributes": {"goal": f"run {program}", "steps": [worked], "command": worked},
                                     "tags": ["suggested"], "evidence": evidence}]})
        for project, path, klass, failures, calls, sessions in engine.run(_PITFALLS).rows:
            title = f"Edits to {path} fail with {klass}"
            avoid = _AVOID.get(klass, f"look at why edits of {path} fail ({klass}) before trying again")
            out.append({"title": title, "note": f"{failures} failed edits in {sessions} session(s)",
                        "changes": [{"op": "create", "kind": "pitfall", "title": title,
                                     "attributes": {"symptom": f"{klass} when editing {path}", "avoid": avoid,
                                                    "paths": [path], "failure_class": klass},
                                     "tags": ["suggested"] + ([project.lower()] if project else []),
                                     "evidence": [{"type": "tool_call", "value": c} for c in calls[:MAX_EVIDENCE]]}]})
    return out


def suggest(root: str, *, dry_run: bool = False) -> list[Any]:
    """Open a proposal for each new suggestion (titles already known are skipped)."""
    from agentlog.memory.proposals import open_proposal
    from agentlog.memory.store import connect

    con = connect(root)
    try:
        known = {r[0] for r in con.execute("SELECT title FROM memories WHERE deleted = 0")}
        known |= {r[0] for r in con.execute("SELECT title FROM proposals WHERE status IN ('open', 'merged')")}
    finally:
        con.close()
    fresh = [s for s in suggestions(root) if s["title"] not in known]
    if dry_run:
        return fresh
    return [open_proposal(root, s["changes"], title=s["title"], note=s["note"], actor="agent") for s in fresh]
