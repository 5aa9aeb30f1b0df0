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
  (``success``, ``status``, ``stderr``; 0.14x), ``exec_command_end``
  (``exit_code``, ``status``; rollouts written with extended persistence) and
  ``mcp_tool_call_end`` (``result``: ``{"Ok": CallToolResult}`` with ``isError``, or
  ``{"Err": text}``).

An MCP tool's output that starts with ``Error:`` or says the tool call failed is a
failure. A command the sandbox refused is ``denied`` (class ``policy_denied``): its
failure says so in Codex's words ("sandbox denied", "failed in sandbox" …), a record
carries ``sandbox_error``, or, in a turn whose ``sandbox_policy`` confines it
(read-only, workspace-write), the OS says "Operation not permitted".

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
OUTCOME_EVENTS: Final = frozenset(("exec_command_end", "patch_apply_end", "mcp_tool_call_end"))
#: what Codex says of a command its sandbox refused (lower case)
_SANDBOX_DENIAL: Final = ("sandbox denied", "denied by sandbox", "denied by the sandbox", "blocked by sandbox",
                          "blocked by the sandbox", "failed in sandbox", "sandbox error", "sandbox_error")
#: the OS's refusal: the sandbox's when the turn ran under one (lower case)
_EPERM: Final = "operation not permitted"
#: how far into a text its outcome is looked for
_HEAD: Final = 4000
#: the sandbox policies that confine a command (``turn_context.sandbox_policy.type``)
CONFINED: Final = frozenset(("read-only", "workspace-write"))


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


def _denial_in(text: str | None, sandboxed: bool) -> bool:
    """Whether a failed command's text says its sandbox refused it: Codex's words, or
    the OS's "Operation not permitted" when the turn ran confined."""
    if not text:
        return False
    low = text[:_HEAD].lower()
    return any(p in low for p in _SANDBOX_DENIAL) or (sandboxed and _EPERM in low)


def _mcp_result(result: Any) -> CallOutcome | None:
    """The outcome of an ``mcp_tool_call_end``'s ``result`` (``{"Ok": CallToolResult}`` or
    ``{"Err": text}``), None when it has neither."""
    if not isinstance(result, dict):
        return None
    if "Err" in result:
        return CallOutcome("failure", None, c.error_text(result["Err"]) or c.text(result["Err"]))
    ok = result.get("Ok")
    if not isinstance(ok, dict):
        return None
    if ok.get("isError") is True or ok.get("is_error") is True:
        return CallOutcome("failure", None, content_text(ok.get("content")))
    return mcp_text_outcome(content_text(ok.get("content")))


def mcp_text_outcome(text: str | None) -> CallOutcome:
    """The outcome an MCP tool's result text states: a failure when it starts with
    ``Error:`` (or Codex's ``err:``), says the tool call failed, or is a JSON
    ``CallToolResult`` with ``isError``."""
    if not text:
        return SUCCESS
    head = text[:_HEAD].lstrip()
    low = head.lower()
    if low.startswith(("error:", "err:")) or "tool call failed" in low:
        return CallOutcome("failure", None, head)
    if head.startswith("{") and '"isError"' in head:
        ok, value = c.loads_or_none(text)
        if ok and isinstance(value, dict) and value.get("isError") is True:
            return CallOutcome("failure", None, content_text(value.get("content")) or head)
    return SUCCESS


def record_outcome(p: dict[str, Any], sandboxed: bool = False) -> CallOutcome | None:
    """The outcome a structured record (an outcome item, or an outcome ``event_msg``
    payload) gives, or None when it gives none (still in progress, or no field).
    ``sandboxed``: the turn ran under a confining sandbox policy."""
    if "invocation" in p or "result" in p:  # mcp_tool_call_end
        mcp = _mcp_result(p.get("result"))
        if mcp is not None:
            return mcp
    sandbox_error = c.error_text(p.get("sandbox_error")) or c.text(p.get("sandbox_error"))
    if sandbox_error is not None or p.get("sandbox_denied") is True:
        return CallOutcome("denied", c.integer(p.get("exit_code")), sandbox_error or "sandbox denied",
                           "policy_denied")
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
        said = err or c.text(p.get("aggregated_output"))
        if _denial_in(said, sandboxed):
            return CallOutcome("denied", code, said, "policy_denied")
        return CallOutcome("failure", code, err, "nonzero_exit" if code not in (None, 0) else None)
    return SUCCESS


def output_outcome(resp: Any, mcp: bool = False, sandboxed: bool = False) -> CallOutcome:
    """The outcome a call's output states (``output`` of a ``function_call_output`` or
    ``custom_tool_call_output``: text, or an object in some older files). ``mcp``: the
    call is an MCP tool's (:func:`mcp_text_outcome`); ``sandboxed``: its turn ran
    confined. A failure whose text says the sandbox refused it, or a text that starts
    saying so, is a refusal (``denied``, class ``policy_denied``)."""
    out = _output_outcome(resp)
    text = resp if isinstance(resp, str) else c.text(resp.get("output")) if isinstance(resp, dict) else None
    if text is None:
        return out
    if out.status == "failure" and out.cls != "string_mismatch" and _denial_in(text, sandboxed):
        return CallOutcome("denied", out.exit_code, out.error or text[:_HEAD], "policy_denied")
    if out.status == "success" and text.lstrip()[:40].lower().startswith(_SANDBOX_DENIAL):
        return CallOutcome("denied", None, text[:_HEAD], "policy_denied")
    if out.status == "success" and mcp:
        return mcp_text_outcome(text)
    return out


def _output_outcome(resp: Any) -> CallOutcome:
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
    if said.status == "denied":
        return said._replace(exit_code=fields.exit_code if fields.exit_code is not None else said.exit_code)
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


__all__ = ["CONFINED", "INJECTED", "OUTCOME_EVENTS", "OUTCOME_ITEMS", "PATCH_FAILED", "SUCCESS", "CallOutcome",
           "as_outcome", "combine", "content_text", "injected", "mark", "mcp_text_outcome", "output_outcome",
           "record_outcome", "worse"]
