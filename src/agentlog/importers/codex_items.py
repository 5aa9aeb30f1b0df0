"""What a Codex rollout's items say, read for :mod:`agentlog.importers.codex`: the
outcome of a tool call, and the text of a message (and whether Codex injected it).

A rollout can say how a call ended in two ways:

- **as text**, in the call's ``function_call_output`` / ``custom_tool_call_output``
  (what the model was sent back): ``Exit code: N`` headers (shell, 0.4x–0.17x
  apply_patch), the unified exec tool's ``Chunk ID / Wall time / Process exited
  with code N / … / Output:`` block (``exec_command``, 0.14x and later), an older
  JSON string ``{"output", "metadata": {"exit_code"}}``, or apply_patch's refusal
  ``apply_patch verification failed: <why>`` (0.14x–0.17x), which has no exit code;
- **as fields** of a structured record about the same call id: the
  ``item_completed`` turn item ``CommandExecution`` (``status`` completed / failed
  / declined, ``exit_code``; 0.17x) or ``FileChange``
  (``status``, ``stderr``; 0.17x), ``McpToolCall`` / ``DynamicToolCall`` items
  (``status``, ``success``, ``error``), and the ``event_msg`` ``patch_apply_end``
  (``success``, ``status``, ``stderr``; 0.14x) and ``exec_command_end``
  (``exit_code``, ``status``; rollouts written with extended persistence).

:func:`output_outcome` reads the first, :func:`record_outcome` the second, and
:func:`combine` joins the two accounts of one call: the fields' exit code wins,
and either account's failure is a failure. A success keeps no exit code, as the
Codex hook's ``PostToolUse`` event (whose payload has none) does not.

The user messages of a rollout are not all prompts: Codex sends the model its
own context as user messages too (``<environment_context>`` with the cwd, shell
and date; AGENTS.md instructions; 0.17x tags these ``content_item_kinds``
``environments.environment_context``, a prompt ``user.text``): :func:`injected`
tells them apart by their opening tag.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from agentlog.capture.adapters import common as c

#: apply_patch's own text for a patch it refused (0.14x–0.17x)
PATCH_FAILED: Final = "apply_patch verification failed"
#: apply_patch's texts for a patch whose old lines or context are not in the file (the
#: classifier's keywords are the edit tools' ``old_string`` ones; these are Codex's own)
_PATCH_MISMATCH: Final = ("Failed to find expected lines", "Failed to find context")
#: text Codex injects into the user message stream (not typed by a human)
INJECTED: Final = ("<environment_context>", "<user_instructions>", "<user_shell_command>", "<turn_aborted>",
                   "<subagent_notification>", "# AGENTS.md instructions", "<INSTRUCTIONS>")
#: the turn item types whose fields give a call's outcome (their ``id`` is the call id)
OUTCOME_ITEMS: Final = frozenset(("CommandExecution", "FileChange", "McpToolCall", "DynamicToolCall"))
#: the ``event_msg`` types that give a call's outcome (their ``call_id`` names the call)
OUTCOME_EVENTS: Final = frozenset(("exec_command_end", "patch_apply_end"))


class CallOutcome(NamedTuple):
    """How one call ended: ``status`` (``success``, ``failure`` or ``denied``), its exit
    code, and the error text and failure class (None: classify the text). (A
    ``CommandExecution``'s ``duration`` is not taken: 0.171 gives microseconds for
    commands that ran for tens of milliseconds.)"""

    status: str
    exit_code: int | None = None
    error: str | None = None
    cls: str | None = None


SUCCESS: Final = CallOutcome("success")


def as_outcome(v: Any) -> CallOutcome | None:
    """A :class:`CallOutcome` from its stored form (a list, as a carried state holds it)."""
    if isinstance(v, CallOutcome):
        return v
    if not isinstance(v, (list, tuple)) or len(v) != len(SUCCESS):
        return None
    status, code, err, cls = v
    if status not in ("success", "failure", "denied"):
        return None
    return CallOutcome(status, c.integer(code), c.text(err), c.text(cls))


def content_text(v: Any) -> str | None:
    """The text of a message's ``content``: a string, or the ``text`` of its parts joined."""
    if isinstance(v, str):
        return v
    if not isinstance(v, list):
        return None
    parts = [p["text"] for p in v if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "".join(parts) if parts else None


def injected(text: str) -> bool:
    """Whether a user message's text is context Codex injected rather than a prompt."""
    return text.lstrip().startswith(INJECTED) or c.prompt_kind(text) == "injected"


def _status(v: Any) -> str | None:
    """A status word without its case or separators: ``in_progress``/``inProgress`` → ``inprogress``."""
    s = c.text(v)
    return s.replace("_", "").lower() if s is not None else None


def record_outcome(p: dict[str, Any]) -> CallOutcome | None:
    """The outcome a structured record (an outcome item, or an outcome ``event_msg``
    payload) gives, or None when it gives none (still in progress, or no field)."""
    status = _status(p.get("status"))
    if status in ("inprogress", "pending", "running"):
        return None
    code = c.integer(p.get("exit_code"))
    if code is None:
        code = c.integer(p.get("exitCode"))
    success = p.get("success") if isinstance(p.get("success"), bool) else None
    if status is None and success is None and code is None:
        return None
    err = c.error_text(p.get("error")) or c.text(p.get("stderr"))
    if err is not None and not err.strip():
        err = None
    if status == "declined":
        return CallOutcome("denied", code, err, "permission_denied")
    if status == "failed" or success is False or code not in (None, 0):
        return CallOutcome("failure", code, err, "nonzero_exit" if code not in (None, 0) else None)
    return SUCCESS


def output_outcome(resp: Any) -> CallOutcome:
    """The outcome a call's output states (``output`` of a ``function_call_output`` or
    ``custom_tool_call_output``: text, or an object in some older files)."""
    text = resp if isinstance(resp, str) else None
    if text is not None and text.startswith(PATCH_FAILED):
        # no exit code: the patch was refused before anything ran. What it could not
        # find is a mismatch; the rest is classified ("Failed to read file to update
        # …: No such file or directory" is file_not_found)
        return CallOutcome("failure", None, text, "string_mismatch" if any(m in text for m in _PATCH_MISMATCH)
                           else None)
    code = c.response_exit_code(resp)
    if code is None and text is not None:
        code = c.codex_text_exit_code(text)
    if code is not None and code != 0:
        err = c.text(resp.get("stderr")) if isinstance(resp, dict) else None
        return CallOutcome("failure", code, err, "nonzero_exit")
    if isinstance(resp, dict) and resp.get("interrupted") is True:
        return CallOutcome("failure", None, None, "interrupted")
    if isinstance(resp, dict) and resp.get("success") is False:
        return CallOutcome("failure", None, c.error_text(resp.get("content")))
    return SUCCESS


def combine(said: CallOutcome, fields: CallOutcome | None) -> CallOutcome:
    """One outcome from a call's output (``said``) and a structured record's (``fields``):
    a refusal wins; where the output says nothing against it (a success, or an exit code
    the record also gives) the record decides; else the output's failure stands, with
    the record's exit code when it has one."""
    if fields is None:
        return said
    if fields.status == "denied":
        return fields._replace(error=fields.error or said.error)
    if said.status == "success" or (said.exit_code is not None and fields.exit_code is not None):
        return fields if fields.status == "success" else fields._replace(error=fields.error or said.error)
    code = fields.exit_code if fields.exit_code is not None else said.exit_code
    return CallOutcome("failure", code, said.error or fields.error, said.cls)


def worse(new: CallOutcome, old_status: str) -> bool:
    """Whether ``new`` says more than an end already given with ``old_status``: a
    failure or refusal after a success, a refusal after a failure."""
    rank = {"success": 0, "failure": 1, "denied": 2}
    return rank.get(new.status, 0) > rank.get(old_status, 0)


def mark(ev: dict[str, Any], outcome: CallOutcome) -> None:
    """Give a tool end event (``c.new_event`` form) its outcome: a success stays
    ``tool_call_finished``; a failure or refusal makes it ``tool_call_failed`` with the
    outcome's status, exit code and class (``c.set_failure``: the class of the error
    text when none is given)."""
    if outcome.status == "success":
        ev["kind"] = "tool_call_finished"
        ev["outcome"] = {"status": "success"}
        return
    ev["kind"] = "tool_call_failed"
    if outcome.cls == "interrupted":
        ev["attrs"]["interrupted"] = True
    c.set_failure(ev, outcome.error, outcome.exit_code, cls=outcome.cls, status=outcome.status)


__all__ = ["INJECTED", "OUTCOME_EVENTS", "OUTCOME_ITEMS", "PATCH_FAILED", "SUCCESS", "CallOutcome", "as_outcome",
           "combine", "content_text", "injected", "mark", "output_outcome", "record_outcome", "worse"]
