"""A failed tool call's class, from the signals a developer would read, in order of trust.

1. The agent's structured fields (``hint``): Claude's ``is_interrupt``, a
   permission system's refusal, a harness's cancellation, Cursor's
   ``failure_type``, Gemini's ``cancelled`` status.
2. The exit code's conventions: 127 (command not found), 126 (not
   executable), 124 (``timeout``), 130 (SIGINT); 137/143 only with the agent's
   own "timed out" line.
3. For the agents' own tools (edit, read, search, web, subagent, MCP): the
   tool's message, which is short and written by the agent.
4. The verdict of a test runner, compiler, type checker or linter, read from
   its own summary lines (:mod:`.summaries`, :mod:`.checks`).
5. The command's category (git, install, lint, build, network, test).
6. The first and last lines of the output, where tools print their verdict
   (the last error line of a traceback, ``cat: x: No such file or directory``),
   matched as the tools print them, never as a bare word anywhere.
7. Else ``nonzero_exit`` with a code, ``unknown`` without one.

Runs on the hook path: standard library only, no ``re``; a 30 KB output costs
tens of microseconds (``agentlog bench classify``).
"""

from __future__ import annotations

from agentlog.capture.failures.summaries import PUNCT, summarize, words_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HEAD = 1024
"""The head of an output read for the agent's own header and the first lines."""
TAIL = 2048
"""The tail read first for verdict lines (a runner's summary, a traceback's last line)."""
WIDE = 4096
"""When the tail says nothing, this much of it is read again: a verdict followed by
more unrelated output than this is not seen."""
STRONG_HINTS = frozenset({"interrupted", "cancelled", "policy_denied", "timeout", "permission_denied",
                          "string_mismatch", "edit_conflict", "tool_usage_error"})

# The agents' own tool messages (lower case), first match wins.
_TOOL_MESSAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("interrupted", ("interrupted by user", "[request interrupted", "user interrupted", "cancelled by user",
                     "canceled by user", "aborted by user", "aborted by the user")),
    ("cancelled", ("sibling tool call errored", "cancelled because", "canceled because", "was cancelled",
                   "was canceled", "tool call cancelled", "tool call canceled")),
    ("policy_denied", ("doesn't want to proceed", "user rejected", "requires approval", "needs approval",
                       "permission to use", "has been denied", "denied by", "blocked by", "was blocked",
                       "not allowed to", "rejected by", "sandbox denied", "denied by policy")),
    ("edit_conflict", ("has not been read yet", "read it first", "modified since read", "been modified since",
                       "unexpectedly modified", "changed since it was read", "modified externally")),
    ("string_mismatch", ("string to replace not found", "old_string not found", "failed to find expected lines",
                         "failed to find context", "could not find the string", "occurrences found for old_string",
                         "0 occurrences found", "no occurrences", "could not find old_string",
                         "matches of the string to replace", "found multiple matches", "expected 1 occurrence",
                         "could not find a match", "old_string was not found", "text not found in file",
                         "matches nothing", "could not find an exact match")),
    ("tool_usage_error", ("inputvalidationerror", "invalid tool parameters", "unknown skill", "no changes to make",
                          "exactly the same", "agent type '", "required parameter", "missing required",
                          "invalid argument", "invalid params", "invalid parameters", "unexpected parameter",
                          "must be an absolute path", "must be absolute", "no such tool", "unknown tool",
                          "tool not found", "exceeds maximum allowed", "use offset and limit", "is a directory",
                          "eisdir", "cannot read binary", "params must", "invalid input", "validation error",
                          "is not a valid", "unrecognized", "not a valid json", "failed to parse")),
    ("file_not_found", ("file does not exist", "no such file or directory", "enoent", "path does not exist",
                        "file not found", "directory does not exist", "cannot find the path", "does not exist",
                        "not found:")),
    ("permission_denied", ("permission denied", "eacces", "eperm", "operation not permitted", "read-only file system")),
    ("network_error", ("econnrefused", "enotfound", "econnreset", "getaddrinfo", "fetch failed", "socket hang up",
                       "network error", "connection refused", "could not resolve", "failed to fetch",
                       "status code 4", "status code 5", "request failed with status", "unable to fetch",
                       "http error", "certificate", "connection error", "connect timeout")),
    ("timeout", ("timed out", "timeout exceeded", "deadline exceeded", "etimedout")),
)

# Line signatures of shell output (lower case, as the tools print them), first match wins
# within one line; lines are read from the last up.
_LINE_SIGNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("syntax_error", ("syntaxerror:", "indentationerror:", "taberror:", "syntax error near unexpected token",
                      "syntax error: ", "unexpected end of file", "parseerror:", "parse error:")),
    ("dependency_missing", (": command not found", "command not found: ", "modulenotfounderror:",
                            "no module named ", "cannot find module '", "cannot find package",
                            "no matching distribution found", "could not find a version that satisfies",
                            "is not in this registry", "npm err! 404", "npm error 404", "npm error code e404",
                            "unable to locate package", "no matching version found", "is not installed",
                            "please install", "install with:", "executable file not found in $path",
                            "no required module provides package", "can't find crate",
                            "error: no such command", "package not found",
                            "cannot load such file", "importerror: ", "missingspecerror")),
    ("merge_conflict", ("conflict (", "automatic merge failed", "fix conflicts and", "merge conflict in",
                        "resolve all conflicts", "could not apply ", "unmerged files", "you have unmerged paths")),
    ("network_error", ("could not resolve host", "connection refused", "failed to connect", "network is unreachable",
                       "temporary failure in name resolution", "name or service not known", "connection reset",
                       "econnrefused", "enotfound", "getaddrinfo", "certificate verify failed",
                       "ssl: ", "urlerror", "connectionerror", "connectionrefusederror", "max retries exceeded",
                       "unable to access 'http", "no route to host", "could not connect to")),
    ("file_not_found", (": no such file or directory", "filenotfounderror:", "enoent:", "cannot access '",
                        "can't open file", "no such file or directory (os error 2)", "does not exist",
                        "pathspec '", "not found in any of the sources")),
    ("permission_denied", (": permission denied", "permissionerror:", "eacces:", "operation not permitted",
                           "read-only file system", "access is denied")),
    ("timeout", ("timeouterror", "timed out after", "deadline exceeded", "command timed out", "operation timed out")),
    ("interrupted", ("keyboardinterrupt",)),
)
_HEADERS = ("exit code", "process exited with code", "exit status", "exited with code", "returned exit code")
_DIGITS = "0123456789"


def _windows(text: str | None, output: str | None, size: int) -> str:
    """The head and the last ``size`` characters of the error text and of the output."""
    parts = []
    for p in (text, output):
        if p and p not in parts:
            parts.append(p if len(p) <= HEAD + size else p[:HEAD] + "\n" + p[-size:])
    return "\n".join(parts)


def header_exit_code(text: str) -> int | None:
    """The exit code the agent wrote in the first or last lines (``Exit code 2``,
    ``Exit code: 1``, ``Process exited with code 1``), else None."""
    lines = text[:600].splitlines()[:6] + text[-300:].splitlines()[-3:]
    for line in lines:
        low = line.strip().lower()
        for h in _HEADERS:
            if low.startswith(h):
                rest = low[len(h):].lstrip(" :=")
                sign = -1 if rest.startswith("-") else 1
                rest = rest.lstrip("-")
                k = 0
                while k < len(rest) and k < 10 and rest[k] in _DIGITS:
                    k += 1
                if k:
                    return sign * int(rest[:k])
    return None


def _agent_timeout(text: str) -> bool:
    """The agent's own time-out line: the first two or the last line of its message."""
    lines = text[:400].splitlines()[:2] + text[-200:].splitlines()[-1:]
    for line in lines:
        low = line.strip().lower()
        if any(low.startswith(w) or low.startswith("error: " + w) for w in ("command timed out", "timed out", "timeout")):
            return True
        if "timed out after" in low and len(low) < 120:
            return True
    return False


_HARNESS = frozenset({"interrupted", "cancelled", "policy_denied"})


def _tool_message(text: str, only: frozenset[str] | None = None) -> str | None:
    """The class an agent tool's own message says: read in its first two lines (after
    them come echoes of the call's input, such as an edit's old text)."""
    lines = [ln for ln in text[:1200].splitlines() if ln.strip()][:2]
    low = "\n".join(ln[:300] for ln in lines).lower()
    for klass, needles in _TOOL_MESSAGES:
        if only is not None and klass not in only:
            continue
        for needle in needles:
            if needle in low:
                return klass
    return None


_PUNCT = PUNCT
SIGN_LINES = 20
"""Line signatures are looked for in the last this many lines (and the first few)."""
WIDE_LINES = 60
"""…and, when those say nothing, in this many."""


def _keyed_signs() -> dict[bytes, tuple[tuple[int, str, str], ...]]:
    """Each signature under its longest word: a line is checked only for the signatures
    whose word it has (a dictionary lookup a word), then for the signature itself."""
    out: dict[bytes, list[tuple[int, str, str]]] = {}
    order = 0
    for klass, needles in _LINE_SIGNS:
        for needle in needles:
            words = needle.encode().translate(_PUNCT).split()
            out.setdefault(max(words, key=len), []).append((order, needle, klass))
            order += 1
    return {k: tuple(v) for k, v in out.items()}


_SIGNS_BY_WORD = _keyed_signs()
_SIGN_WORDS = frozenset(_SIGNS_BY_WORD)


def _line_sign(lines: list[str], words: frozenset[bytes] | None = None) -> tuple[str, str] | None:
    """(class, the line) of the last line carrying a signature (the first in table order
    when a line has several). The block's words are looked up all at once (a set
    intersection); only the signatures of the words found are looked for."""
    block = "\n".join(lines)
    low = block.lower()
    hits = _SIGN_WORDS.intersection(words if words is not None else words_of(block))
    if not hits:
        return None
    best_at = -1
    best: tuple[int, str, str] | None = None
    for word in hits:
        for sign in _SIGNS_BY_WORD[word]:
            at = low.rfind(sign[1])
            if at < 0:
                continue
            line_at = low.rfind("\n", 0, at)
            if best is None or line_at > best_at or (line_at == best_at and sign[0] < best[0]):
                best_at, best = line_at, sign
    if best is None:
        return None
    end = low.find("\n", best_at + 1)
    return best[2], block[best_at + 1 : end if end >= 0 else len(block)].strip()[:200]


def _verdict(klass: str, code: int | None, evidence: str, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"class": klass, "exit_code": code, "evidence": evidence}
    if summary:
        out["summary"] = summary
    return out


def _failed(summary: dict[str, Any]) -> bool:
    return bool(summary.get("failed") or summary.get("errors") or summary.get("packages_failed"))


def classify(
    text: str | None,
    output: str | None = None,
    *,
    category: str = "",
    command: str | None = None,
    command_category: str | None = None,
    command_subcategory: str | None = None,
    programs: tuple[str, ...] = (),
    exit_code: int | None = None,
    hint: str | None = None,
) -> dict[str, Any]:
    """``{"class", "exit_code", "evidence", "summary"?}`` of a failed call.

    ``text`` is the error the agent reported, ``output`` the tool's output when
    it is separate (stdout of a shell call); ``category`` the tool category
    (``classify_tool``); ``command_*`` and ``programs`` the shell command's facts;
    ``exit_code`` a structured code; ``hint`` a class the agent's structured
    fields already say (kept when it is one of :data:`STRONG_HINTS`)."""
    view = _windows(text, output, TAIL)
    code = exit_code if exit_code is not None else header_exit_code(view)
    if hint in STRONG_HINTS:
        return _verdict(hint, code, "agent")
    shell = category == "shell" or command is not None
    if not shell:
        klass = _tool_message(text or output or "")
        if klass is not None:
            return _verdict(klass, code, "tool message")
        return _verdict("nonzero_exit" if code else "unknown", code, "exit code" if code else "no signal")
    if code is None:  # no command ran to give a code: the harness's own word (refused, cancelled)
        klass = _tool_message(text or "", _HARNESS)
        if klass is not None:
            return _verdict(klass, code, "agent message")
    if _agent_timeout(text or ""):
        return _verdict("timeout", code, "agent: timed out")
    head_lines = view[:HEAD].splitlines()[:4]
    tail_lines = view[-TAIL:].splitlines()[-SIGN_LINES:]
    words = words_of("\n".join(head_lines + tail_lines))
    sign = _line_sign(head_lines + tail_lines, words)
    if code == 127:
        if sign is not None and sign[0] == "file_not_found":
            return _verdict("file_not_found", code, "exit code 127: " + sign[1])
        return _verdict("dependency_missing", code, "exit code 127 (command not found)")
    if code == 126:
        return _verdict("permission_denied", code, "exit code 126 (not executable)")
    if code == 124:
        return _verdict("timeout", code, "exit code 124 (timeout)")
    if code == 130:
        return _verdict("interrupted", code, "exit code 130 (SIGINT)")
    vet = "go" in programs and command is not None and " vet" in command
    summary = summarize(view, view[-TAIL:], words)
    if summary is not None:
        got = _from_summary(summary, sign, vet, command_subcategory, code)
        if got is not None:
            return got
    if sign is None and (len(text or "") + len(output or "") > len(view) or len(tail_lines) == SIGN_LINES):
        view = _windows(text, output, WIDE)  # read further up
        wide_lines = head_lines + view[-WIDE:].splitlines()[-WIDE_LINES:]
        wide_words = words_of("\n".join(wide_lines))
        sign = _line_sign(wide_lines, wide_words)
        if summary is None:
            summary = summarize(view, view[-WIDE:], wide_words)
            if summary is not None:
                got = _from_summary(summary, sign, vet, command_subcategory, code)
                if got is not None:
                    return got
    return _from_command(command_category, command_subcategory, programs, sign, code, view, summary)


def _from_summary(summary: dict[str, Any], sign: tuple[str, str] | None, vet: bool,
                  sub: str | None, code: int | None) -> dict[str, Any] | None:
    if summary.get("kind") == "tests":
        runner = summary.get("runner", "tests")
        if summary.get("build_failed"):
            return _verdict("compile_error", code, f"{runner}: build failed", summary)
        if summary.get("collection_errors") and sign is not None and sign[0] in ("dependency_missing", "syntax_error"):
            return _verdict(sign[0], code, f"{runner} collection: {sign[1]}", summary)
        if _failed(summary):
            return _verdict("test_failure", code, f"{runner} summary", summary)
        return None
    klass = str(summary.get("class", "nonzero_exit"))
    if summary.get("errors") == 0 and klass != "build_error":
        return None
    if klass in ("compile_error", "build_error") and sign is not None and sign[0] == "dependency_missing":
        return _verdict("dependency_missing", code, f"{summary.get('checker')} output: {sign[1]}", summary)
    if klass == "compile_error" and (vet or sub == "dev.lint"):
        klass = "lint_error"
    return _verdict(klass, code, f"{summary.get('checker')} output", summary)


_LINT_TYPE = ("mypy", "pyright", "tsc", "pytype", "pyre")
_LOOKUP = ("which", "type", "hash", "whereis")


def _from_command(cat: str | None, sub: str | None, programs: tuple[str, ...], sign: tuple[str, str] | None,
                  code: int | None, body: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    def by_sign(default: str, evidence: str) -> dict[str, Any]:
        if sign is not None:
            return _verdict(sign[0], code, "output: " + sign[1], summary)
        return _verdict(default, code, evidence, summary)

    if cat == "git" or sub == "net.github":
        if sign is not None and sign[0] in ("merge_conflict", "network_error"):
            return _verdict(sign[0], code, "git: " + sign[1])
        return _verdict("git_error", code, "git command failed")
    if sign is not None and sign[0] in ("syntax_error", "dependency_missing"):
        return _verdict(sign[0], code, "output: " + sign[1], summary)
    if cat == "test":
        return by_sign("test_failure" if code == 1 else "nonzero_exit", "test command failed")
    if sub in ("dev.lint", "pkg.lint"):
        klass = "type_error" if any(p in _LINT_TYPE for p in programs) else "lint_error"
        return _verdict(klass, code, "checker failed", summary)
    if cat == "build":
        return by_sign("build_error", "build command failed")
    if cat == "install":
        return by_sign("nonzero_exit", "install command failed")
    if cat == "network":
        if code in (6, 7, 35, 52, 56) and "curl" in programs:
            return _verdict("network_error", code, f"curl exit {code}")
        if code == 28 and "curl" in programs:
            return _verdict("timeout", code, "curl exit 28 (timed out)")
        return by_sign("network_error" if code in (4,) and "wget" in programs else "nonzero_exit", "network command failed")
    if any(p in _LOOKUP for p in programs) and (code == 1 or " not found" in body[-300:]):
        return _verdict("dependency_missing", code, "command lookup found nothing")
    if code in (137, 143) and sign is not None and sign[0] == "timeout":
        return _verdict("timeout", code, f"exit code {code} after a timeout")
    if sign is not None:
        return _verdict(sign[0], code, "output: " + sign[1], summary)
    if code:
        return _verdict("nonzero_exit", code, f"exit code {code}", summary)
    return _verdict("unknown", code, "no signal", summary)
