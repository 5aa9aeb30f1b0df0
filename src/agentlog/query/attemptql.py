"""AttemptQL: the statement language for asking about attempts, parsed by hand.

The language is compatible with attemptdb's. A statement is one command,
optionally prefixed by ``EXPLAIN`` and followed by ``;``; ``--`` comments run
to the end of the line and may appear anywhere. Keywords are
case-insensitive::

    statement   := [EXPLAIN] command [";"]
    command     := show | why | trace | state | diff | what_is
    what_is     := WHAT IS subject DOING NOW
    why         := WHY subject [STATUS] (BLOCKED | FAILED)
    trace       := TRACE subject CAUSES { DEPTH int | DIRECTION (UP|DOWN|BOTH) }
    state       := STATE [subject] AT time
    diff        := DIFF STATE [subject] time time
    show        := SHOW target { FOR filter_list | WHERE predicate | SINCE time
                               | UNTIL time | ORDER BY column [ASC|DESC]
                               | LIMIT int | INCLUDING RETRACTED }

:func:`parse` returns the AST (frozen dataclasses below) or raises
:class:`ParseError` with a position and a code: ``AQL01xx`` lexical,
``AQL02xx`` syntax, ``AQL04xx`` semantic. Names and times are kept as
written: ids are resolved elsewhere, times with :func:`timeexpr.resolve`.
:func:`is_attemptql` tells a statement of this language from SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, NoReturn, Sequence, TypeAlias

from agentlog.core import UsageError
from agentlog.query import timeexpr

__all__ = [
    "Target",
    "Time",
    "Subject",
    "SubjectKind",
    "Filter",
    "Show",
    "Trace",
    "State",
    "Diff",
    "Why",
    "WhatIs",
    "Explain",
    "Statement",
    "ParseError",
    "parse",
    "is_attemptql",
    "RESERVED",
    "PHASES",
    "FILTER_FIELDS",
]

# --------------------------------------------------------------------------- AST

Target = Literal[
    "attempts",
    "failed_attempts",
    "superseded_attempts",
    "sessions",
    "turns",
    "tool_calls",
    "handoffs",
    "work_units",
    "decisions",
    "corrections",
    "retractions",
    "evidence",
    "edges",
    "signals",
    "commits",
    "conflicts",
]
"""What a SHOW statement lists."""

SubjectKind = Literal["project", "session", "attempt", "turn", "tool_call", "event", "agent", "work_unit", "id"]
"""What a subject names; ``id`` is an id of unstated kind (resolved elsewhere)."""


@dataclass(frozen=True)
class Time:
    """A time expression as written (quotes removed), not yet resolved.

    Resolve it with ``timeexpr.resolve(time.text, now_us)``; ``position`` is
    the character offset of the expression in the statement.
    """

    text: str
    position: int


@dataclass(frozen=True)
class Subject:
    """What a statement is about: a kind and the value as written.

    ``value`` is None only for a bare ``project`` (the current/default
    project). Bare ids keep any display prefix (``att_…``, ``ses_…``).
    ``position`` is the offset of the subject's first token.
    """

    kind: SubjectKind
    value: str | None
    position: int


@dataclass(frozen=True)
class Filter:
    """One ``field = value`` of a FOR list (``since``/``until`` go to :class:`Show`).

    ``field`` is lower-case; ``value`` is as written, except a ``phase``
    value, which is lower-case and one of :data:`PHASES`.
    """

    field: str
    value: str
    position: int


@dataclass(frozen=True)
class Show:
    """``SHOW target …``: list rows of a target, filtered, ordered, limited.

    ``where`` is a raw SQL boolean expression, verbatim (comments removed);
    ``descending`` is None when neither ASC nor DESC was given; ``subject``
    is set for ``EVIDENCE FOR subject``; ``between`` for
    ``HANDOFFS BETWEEN field=value AND field=value`` (fields ``agent`` or
    ``provider``).
    """

    target: Target
    filters: tuple[Filter, ...] = ()
    where: str | None = None
    since: Time | None = None
    until: Time | None = None
    order_by: str | None = None
    descending: bool | None = None
    limit: int | None = None
    including_retracted: bool = False
    subject: Subject | None = None
    between: tuple[tuple[str, str], tuple[str, str]] | None = None


@dataclass(frozen=True)
class Trace:
    """``TRACE subject CAUSES``: follow cause edges from a subject."""

    subject: Subject
    depth: int | None = None
    direction: Literal["up", "down", "both"] | None = None


@dataclass(frozen=True)
class State:
    """``STATE [subject] AT time``: the state of a subject (or everything) at an instant."""

    subject: Subject | None
    at: Time


@dataclass(frozen=True)
class Diff:
    """``DIFF STATE [subject] time time``: what changed between two instants."""

    subject: Subject | None
    first: Time
    second: Time


@dataclass(frozen=True)
class Why:
    """``WHY subject [STATUS] BLOCKED|FAILED``: explain a blocked or failed subject."""

    subject: Subject
    state: Literal["blocked", "failed"]


@dataclass(frozen=True)
class WhatIs:
    """``WHAT IS subject DOING NOW``: the subject's current activity."""

    subject: Subject


@dataclass(frozen=True)
class Explain:
    """``EXPLAIN statement``: show how the statement would be answered."""

    statement: Statement


Statement: TypeAlias = Show | Trace | State | Diff | Why | WhatIs | Explain
"""Any parsed statement."""

# --------------------------------------------------------------------------- vocabulary

RESERVED: Final = frozenset(
    """SHOW WHY TRACE STATE DIFF WHAT IS DOING NOW STATUS CAUSES AT FOR WHERE SINCE UNTIL
    ORDER BY LIMIT DEPTH DIRECTION AND BETWEEN EXPLAIN ATTEMPTS SESSIONS TURNS HANDOFFS
    DECISIONS EVIDENCE INCLUDING RETRACTED WORK UNITS CORRECTIONS RETRACTIONS""".split()
)
"""Words that cannot be bare ids or values (quote them to use them so)."""

PHASES: Final = ("blocked", "debug", "deliver", "verify", "explore", "plan", "review", "implement")
"""The values a ``phase`` filter may take."""

FILTER_FIELDS: Final = (
    "project",
    "provider",
    "agent",
    "session",
    "turn",
    "path",
    "outcome",
    "tool",
    "status",
    "phase",
    "kind",
)
"""The fields of a FOR list (besides ``since`` and ``until``)."""

_COMMANDS: Final = ("SHOW", "WHY", "TRACE", "STATE", "DIFF", "WHAT IS")

_SINGLE_TARGETS: Final[dict[str, Target]] = {
    "ATTEMPTS": "attempts",
    "SESSIONS": "sessions",
    "TURNS": "turns",
    "TOOL_CALLS": "tool_calls",
    "HANDOFFS": "handoffs",
    "WORK_UNITS": "work_units",
    "DECISIONS": "decisions",
    "CORRECTIONS": "corrections",
    "RETRACTIONS": "retractions",
    "EDGES": "edges",
    "SIGNALS": "signals",
    "COMMITS": "commits",
    "CONFLICTS": "conflicts",
}
_PAIR_TARGETS: Final[dict[str, tuple[str, Target]]] = {
    "FAILED": ("ATTEMPTS", "failed_attempts"),
    "SUPERSEDED": ("ATTEMPTS", "superseded_attempts"),
    "TOOL": ("CALLS", "tool_calls"),
    "WORK": ("UNITS", "work_units"),
    "EVIDENCE": ("FOR", "evidence"),
}
_TARGET_WORDS: Final = frozenset(_SINGLE_TARGETS) | frozenset(_PAIR_TARGETS)
_TARGETS_EXPECTED: Final = (
    "ATTEMPTS",
    "FAILED ATTEMPTS",
    "SUPERSEDED ATTEMPTS",
    "SESSIONS",
    "TURNS",
    "TOOL CALLS",
    "TOOL_CALLS",
    "HANDOFFS",
    "WORK UNITS",
    "WORK_UNITS",
    "DECISIONS",
    "CORRECTIONS",
    "RETRACTIONS",
    "EVIDENCE FOR",
    "EDGES",
    "SIGNALS",
    "COMMITS",
    "CONFLICTS",
)

_SUBJECT_KINDS: Final[dict[str, SubjectKind]] = {
    "session": "session",
    "attempt": "attempt",
    "turn": "turn",
    "span": "tool_call",
    "tool_call": "tool_call",
    "event": "event",
    "agent": "agent",
    "work_unit": "work_unit",
}
_SUBJECT_EXPECTED: Final = (
    "project",
    "session",
    "attempt",
    "turn",
    "span",
    "tool_call",
    "tool call",
    "event",
    "agent",
    "work_unit",
    "work unit",
    "a quoted id",
    "an id",
)

_CLAUSES: Final = ("FOR", "WHERE", "SINCE", "UNTIL", "ORDER BY", "LIMIT", "INCLUDING RETRACTED")
_PREDICATE_STOP: Final = frozenset({"SINCE", "UNTIL", "ORDER", "LIMIT", "INCLUDING"})
_TIME_EXPECTED: Final = "a time ('RFC 3339', 'YYYY-MM-DD', epoch seconds, now, today, yesterday, -15m)"
_END: Final = ("';'", "end of statement")

_INT: Final = re.compile(r"[+-]?[0-9]+")
_COLUMN: Final = re.compile(r"[A-Za-z0-9_]+")
_DOLLAR_TAG: Final = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")
_MAX_INT_DIGITS: Final = 18
_QUOTE_MAX: Final = 40

# --------------------------------------------------------------------------- errors


def _quote(raw: str) -> str:
    """A piece of the statement as an error quotes it: ≤ 40 characters, printable."""
    cut = raw[:_QUOTE_MAX]
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return "'" + safe + ("…'" if len(raw) > _QUOTE_MAX else "'")


def _expecting(expected: Sequence[str]) -> str:
    if not expected:
        return ""
    if len(expected) == 1:
        return "; expected " + expected[0]
    return "; expected one of: " + ", ".join(expected)


class ParseError(UsageError, ValueError):
    """An AttemptQL statement that cannot be parsed.

    ``message`` (also ``str(err)``) reads like ``unexpected 'FOO' at 12;
    expected one of: ATTEMPTS, SESSIONS, …`` and quotes at most 40 characters
    of the statement; ``position`` is the character offset of the problem;
    ``code`` is ``AQL01xx`` (lexical), ``AQL02xx`` (syntax) or ``AQL04xx``
    (semantic); ``expected`` lists what would have been accepted there.
    """

    def __init__(self, message: str, position: int, code: str, expected: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message: str = message
        self.position: int = position
        self.code: str = code
        self.expected: tuple[str, ...] = tuple(expected)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[ParseError], tuple[str, int, str, tuple[str, ...]]]:
        return (type(self), (self.message, self.position, self.code, self.expected))

    def caret(self, text: str) -> str:
        """Two lines: the statement line holding the error, and a ``^`` under its position."""
        pos = max(0, min(self.position, len(text)))
        start = text.rfind("\n", 0, pos) + 1
        stop = text.find("\n", pos)
        line = text[start : stop if stop >= 0 else len(text)].rstrip("\r")
        pad = "".join("\t" if c == "\t" else " " for c in text[start:pos])
        return f"{line}\n{pad}^"


# --------------------------------------------------------------------------- lexer

TokenKind = Literal["word", "string", "qident", "punct", "eof"]


@dataclass(frozen=True)
class _Token:
    """One token: ``text`` is the word as written, a string's unescaped content, or the punctuation."""

    kind: TokenKind
    text: str
    pos: int
    end: int

    def upper(self) -> str:
        """The word upper-cased (empty for anything but a word)."""
        return self.text.upper() if self.kind == "word" else ""


_WORD_EXTRA: Final = frozenset("_-./*:~+")


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c in _WORD_EXTRA


def _quoted_end(src: str, i: int, q: str) -> int | None:
    """End (past the closing quote) of the quoted text opening at ``i``; a doubled quote is literal."""
    j = i + 1
    while True:
        k = src.find(q, j)
        if k < 0:
            return None
        if src.startswith(q + q, k):
            j = k + 2
            continue
        return k + 1


def _skip_blank(src: str, i: int) -> int:
    """Skip whitespace and ``--`` comments from ``i``."""
    n = len(src)
    while i < n:
        if src[i].isspace():
            i += 1
        elif src.startswith("--", i):
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
        else:
            break
    return i


def _lex(src: str, i: int) -> _Token:
    """The token at or after ``i``."""
    n = len(src)
    i = _skip_blank(src, i)
    if i >= n:
        return _Token("eof", "", n, n)
    c = src[i]
    if c in "'\"":
        end = _quoted_end(src, i, c)
        if end is None:
            what = "string" if c == "'" else "quoted identifier"
            raise ParseError(
                f"unterminated {what} at {i}; expected a closing {c}",
                i,
                "AQL0101" if c == "'" else "AQL0102",
                (c,),
            )
        return _Token("string" if c == "'" else "qident", src[i + 1 : end - 1].replace(c + c, c), i, end)
    if _is_word_char(c):
        j = i + 1
        while j < n and _is_word_char(src[j]) and not src.startswith("--", j):
            j += 1
        return _Token("word", src[i:j], i, j)
    return _Token("punct", c, i, i + 1)


def _scan_predicate(src: str, start: int) -> tuple[str, int]:
    """Capture a WHERE predicate from ``start``: its text (comments removed) and where it stops.

    It stops at a top-level SINCE/UNTIL/ORDER/LIMIT/INCLUDING word, at ``;``
    or at the end; quoted strings, quoted identifiers, dollar-quoted strings
    and comments are skipped over, and brackets must balance.
    """
    n = len(src)
    parts: list[str] = []
    seg = start
    stack: list[tuple[str, int]] = []
    closers = {")": "(", "]": "[", "}": "{"}
    i = start
    stop = n
    while i < n:
        c = src[i]
        if c in "'\"":
            end = _quoted_end(src, i, c)
            if end is None:
                what = "string" if c == "'" else "quoted identifier"
                code = "AQL0101" if c == "'" else "AQL0102"
                raise ParseError(f"unterminated {what} at {i}; expected a closing {c}", i, code, (c,))
            i = end
            continue
        if c == "$":
            m = _DOLLAR_TAG.match(src, i)
            if m:
                close = src.find(m.group(0), m.end())
                if close < 0:
                    raise ParseError(
                        f"unterminated string {_quote(m.group(0))} at {i}; expected a closing {m.group(0)}",
                        i,
                        "AQL0101",
                        (m.group(0),),
                    )
                i = close + len(m.group(0))
                continue
        if src.startswith("--", i):
            parts.append(src[seg:i])
            j = src.find("\n", i)
            i = seg = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            parts.append(src[seg:i] + " ")
            j = src.find("*/", i + 2)
            if j < 0:
                raise ParseError(f"unterminated comment at {i}; expected */", i, "AQL0103", ("*/",))
            i = seg = j + 2
            continue
        if c in "([{":
            stack.append((c, i))
        elif c in closers:
            if not stack or stack[-1][0] != closers[c]:
                want = [{"(": "')'", "[": "']'", "{": "'}'"}[stack[-1][0]]] if stack else []
                raise ParseError(
                    f"unbalanced {_quote(c)} at {i} in WHERE predicate"
                    + _expecting(want or ["a predicate without unmatched brackets"]),
                    i,
                    "AQL0207",
                    want,
                )
            stack.pop()
        elif c == ";":
            stop = i
            break
        elif c.isalnum() or c == "_":
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            if not stack and src[i:j].upper() in _PREDICATE_STOP and (i == 0 or src[i - 1] != "."):
                stop = i
                break
            i = j
            continue
        i += 1
    if stack:
        opener, at = stack[-1]
        closer = {"(": "')'", "[": "']'", "{": "'}'"}[opener]
        message = f"unclosed {_quote(opener)} at {at} in WHERE predicate; expected {closer}"
        raise ParseError(message, at, "AQL0207", (closer,))
    parts.append(src[seg:stop])
    return "".join(parts).strip(), stop


# --------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent over lazily lexed tokens (lazily, so WHERE can take raw text)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.cursor = 0
        self.last_end = 0
        self.buf: list[_Token] = []
        self.trailing: list[str] = []
        """What the command would still have accepted where it stopped."""

    # -- tokens

    def peek(self, k: int = 0) -> _Token:
        while len(self.buf) <= k:
            if self.buf and self.buf[-1].kind == "eof":
                self.buf.append(self.buf[-1])
            else:
                self.buf.append(_lex(self.src, self.buf[-1].end if self.buf else self.cursor))
        return self.buf[k]

    def advance(self) -> _Token:
        tok = self.peek()
        del self.buf[0]
        self.cursor = self.last_end = tok.end
        return tok

    def at(self, *words: str, k: int = 0) -> bool:
        return self.peek(k).upper() in words

    def at_punct(self, c: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "punct" and tok.text == c

    def expect(self, word: str, expected: Sequence[str] | None = None) -> _Token:
        if not self.at(word):
            self.fail(self.peek(), expected or [word])
        return self.advance()

    def expect_punct(self, c: str, expected: Sequence[str] | None = None) -> _Token:
        if not self.at_punct(c):
            self.fail(self.peek(), expected or [f"'{c}'"])
        return self.advance()

    def fail(self, tok: _Token, expected: Sequence[str], code: str = "AQL0201", what: str | None = None) -> NoReturn:
        if tok.kind == "eof":
            pos = self.last_end
            raise ParseError(f"unexpected end of statement at {pos}{_expecting(expected)}", pos, "AQL0202", expected)
        raw = self.src[tok.pos : tok.end]
        if what is None:
            what = {"string": "string ", "qident": "quoted identifier ", "word": "", "punct": ""}[tok.kind]
        raise ParseError(f"unexpected {what}{_quote(raw)} at {tok.pos}{_expecting(expected)}", tok.pos, code, expected)

    def semantic(self, tok: _Token, message: str, code: str, expected: Sequence[str] = ()) -> NoReturn:
        raise ParseError(f"{message} at {tok.pos}{_expecting(expected)}", tok.pos, code, expected)

    def is_value(self, k: int = 0, *, time: bool = False) -> bool:
        """Could the token ``k`` ahead be a value (or, with ``time``, a time)?"""
        tok = self.peek(k)
        if tok.kind == "string":
            return True
        if tok.kind != "word":
            return False
        return tok.upper() not in RESERVED or (time and tok.upper() == "NOW")

    # -- pieces

    def value(self, expected: str = "a value") -> str:
        tok = self.peek()
        if tok.kind == "string":
            return self.advance().text
        if tok.kind == "word":
            if tok.upper() in RESERVED:
                self.fail(tok, [f"{expected} (quote reserved words: {_quote(tok.text)})"], "AQL0204", "reserved word ")
            return self.advance().text
        self.fail(tok, [expected])

    def time(self) -> Time:
        tok = self.peek()
        if not self.is_value(time=True):
            self.fail(tok, [_TIME_EXPECTED], "AQL0204" if tok.upper() in RESERVED else "AQL0201")
        self.advance()
        try:
            timeexpr.resolve(tok.text, 0)
        except timeexpr.TimeError:
            self.semantic(tok, f"invalid time {_quote(self.src[tok.pos : tok.end])}", "AQL0210", [_TIME_EXPECTED])
        return Time(tok.text, tok.pos)

    def integer(self, what: str) -> tuple[int, _Token]:
        tok = self.peek()
        if tok.kind != "word" or not _INT.fullmatch(tok.text):
            self.fail(tok, [f"an integer ({what})"])
        if len(tok.text.lstrip("+-")) > _MAX_INT_DIGITS:
            self.semantic(tok, f"{what} {_quote(tok.text)} is too large", "AQL0406")
        self.advance()
        return int(tok.text), tok

    def no_as_known(self) -> None:
        if self.at("AS") and self.at("KNOWN", k=1):
            tok = self.peek()
            self.semantic(tok, "AS KNOWN AT is not supported", "AQL0205", ["AT time"])

    def project_takes_name(self, mode: str) -> bool:
        """After ``project``: is the next token its name?"""
        if mode == "diff":
            return self.is_value(0) and self.is_value(1, time=True) and self.is_value(2, time=True)
        if not self.is_value(0):
            return False
        if self.at("AS") and self.at("KNOWN", k=1):
            return False
        if mode == "why" and self.at("BLOCKED", "FAILED") and (self.peek(1).kind == "eof" or self.at_punct(";", k=1)):
            return False
        return True

    def subject(self, mode: str = "default") -> Subject:
        tok = self.peek()
        low = tok.text.lower() if tok.kind == "word" else ""
        if tok.kind == "string":
            self.advance()
            return Subject("id", tok.text, tok.pos)
        if low == "project":
            self.advance()
            name = self.value("a project name") if self.project_takes_name(mode) else None
            return Subject("project", name, tok.pos)
        if low in _SUBJECT_KINDS:
            self.advance()
            return Subject(_SUBJECT_KINDS[low], self.value(f"a {low} id"), tok.pos)
        if (low == "tool" and self.at("CALL", k=1)) or (low == "work" and self.at("UNIT", k=1)):
            self.advance()
            self.advance()
            kind: SubjectKind = "tool_call" if low == "tool" else "work_unit"
            return Subject(kind, self.value(f"a {kind} id"), tok.pos)
        if tok.kind == "word" and tok.upper() not in RESERVED:
            self.advance()
            return Subject("id", tok.text, tok.pos)
        self.fail(tok, _SUBJECT_EXPECTED, "AQL0204" if tok.upper() in RESERVED else "AQL0201")

    # -- statements

    def statement(self) -> Statement:
        stmt: Statement
        if self.at("EXPLAIN"):
            self.advance()
            stmt = Explain(self.command(explained=True))
        else:
            stmt = self.command(explained=False)
        if self.at_punct(";"):
            self.advance()
            self.trailing = []
            end: Sequence[str] = ["end of statement"]
        else:
            end = [*self.trailing, *_END]
        tok = self.peek()
        if tok.kind != "eof":
            self.fail(tok, end, "AQL0203")
        return stmt

    def command(self, explained: bool) -> Statement:
        tok = self.peek()
        word = tok.upper()
        if word == "SHOW":
            return self.show()
        if word == "WHY":
            return self.why()
        if word == "TRACE":
            return self.trace()
        if word == "STATE":
            return self.state()
        if word == "DIFF":
            return self.diff()
        if word == "WHAT":
            self.advance()
            self.expect("IS")
            subject = self.subject()
            self.expect("DOING")
            self.expect("NOW")
            return WhatIs(subject)
        self.fail(tok, _COMMANDS if explained else ("EXPLAIN", *_COMMANDS))

    def why(self) -> Why:
        self.advance()
        subject = self.subject("why")
        has_status = self.at("STATUS")
        if has_status:
            self.advance()
        if not self.at("BLOCKED", "FAILED"):
            self.fail(self.peek(), ["BLOCKED", "FAILED"] if has_status else ["STATUS", "BLOCKED", "FAILED"])
        return Why(subject, "blocked" if self.advance().upper() == "BLOCKED" else "failed")

    def trace(self) -> Trace:
        self.advance()
        subject = self.subject()
        self.expect("CAUSES")
        depth: int | None = None
        direction: Literal["up", "down", "both"] | None = None
        while True:
            options = [w for w, v in (("DEPTH", depth), ("DIRECTION", direction)) if v is None]
            tok = self.peek()
            if self.at("DEPTH", "DIRECTION") and tok.upper() not in options:
                self.semantic(tok, f"duplicate {tok.upper()}", "AQL0405", [*options, *_END])
            if self.at("DEPTH"):
                self.advance()
                depth, num = self.integer("DEPTH")
                if depth < 1:
                    self.semantic(num, f"DEPTH must be at least 1, not {depth}", "AQL0403")
            elif self.at("DIRECTION"):
                self.advance()
                d = self.peek()
                if d.upper() == "UP":
                    direction = "up"
                elif d.upper() == "DOWN":
                    direction = "down"
                elif d.upper() == "BOTH":
                    direction = "both"
                else:
                    self.fail(d, ["UP", "DOWN", "BOTH"])
                self.advance()
            else:
                self.trailing = options
                return Trace(subject, depth, direction)

    def state(self) -> State:
        self.advance()
        self.no_as_known()
        subject = None if self.at("AT") else self.subject()
        self.no_as_known()
        self.expect("AT")
        at = self.time()
        self.no_as_known()
        return State(subject, at)

    def diff(self) -> Diff:
        self.advance()
        self.expect("STATE")
        tok = self.peek()
        low = tok.text.lower() if tok.kind == "word" else ""
        subject = None
        if (
            low == "project"
            or low in _SUBJECT_KINDS
            or (low == "tool" and self.at("CALL", k=1))
            or (low == "work" and self.at("UNIT", k=1))
            or (self.is_value(0) and self.is_value(1, time=True) and self.is_value(2, time=True))
        ):
            subject = self.subject("diff")
        first = self.time()
        second = self.time()
        return Diff(subject, first, second)

    def target(self) -> tuple[Target, Subject | None, tuple[tuple[str, str], tuple[str, str]] | None]:
        tok = self.peek()
        word = tok.upper()
        if word in _SINGLE_TARGETS:
            self.advance()
            target = _SINGLE_TARGETS[word]
            if target == "handoffs" and self.at("BETWEEN"):
                self.advance()
                first, first_tok = self.agent_filter()
                self.expect("AND")
                second, second_tok = self.agent_filter()
                if first == second:
                    self.semantic(
                        second_tok,
                        f"HANDOFFS BETWEEN has the same side twice ({first[0]}={_quote(first[1])})",
                        "AQL0401",
                        ["a different agent or provider"],
                    )
                return target, None, (first, second)
            return target, None, None
        if word in _PAIR_TARGETS:
            second_word, target = _PAIR_TARGETS[word]
            self.advance()
            self.expect(second_word)
            return target, (self.subject() if target == "evidence" else None), None
        self.fail(tok, _TARGETS_EXPECTED, "AQL0204" if word in RESERVED else "AQL0201")

    def agent_filter(self) -> tuple[tuple[str, str], _Token]:
        tok = self.peek()
        if not self.at("AGENT", "PROVIDER"):
            self.fail(tok, ["agent=", "provider="])
        self.advance()
        self.expect_punct("=")
        return (tok.text.lower(), self.value()), tok

    def show(self) -> Show:
        self.advance()
        target, subject, between = self.target()
        filters: list[Filter] = []
        where: str | None = None
        since: Time | None = None
        until: Time | None = None
        order_by: str | None = None
        descending: bool | None = None
        limit: int | None = None
        retracted = False
        seen: set[str] = set()
        extra: list[str] = []

        def once(tok: _Token, clause: str) -> None:
            if clause in seen:
                self.semantic(tok, f"duplicate {clause}", "AQL0405", [*extra, *remaining(), *_END])
            seen.add(clause)

        def remaining() -> list[str]:
            return [c for c in _CLAUSES if c == "FOR" or c.split()[0] not in seen]

        while True:
            tok = self.peek()
            word = tok.upper()
            if word == "FOR":
                self.advance()
                while True:
                    field_tok = self.peek()
                    field = field_tok.text.lower() if field_tok.kind == "word" else ""
                    if field in ("since", "until"):
                        self.advance()
                        once(field_tok, field.upper())
                        if self.at_punct("="):
                            self.advance()
                        if field == "since":
                            since = self.time()
                        else:
                            until = self.time()
                    elif field in FILTER_FIELDS:
                        self.advance()
                        self.expect_punct("=")
                        value_tok = self.peek()
                        value = self.value()
                        if field == "phase":
                            value = value.lower()
                            if value not in PHASES:
                                self.semantic(value_tok, f"unknown phase {_quote(value_tok.text)}", "AQL0404", PHASES)
                        filters.append(Filter(field, value, field_tok.pos))
                    else:
                        self.fail(field_tok, [*FILTER_FIELDS, "since", "until"])
                    if self.at("AND") or self.at_punct(","):
                        self.advance()
                        continue
                    break
                extra = ["AND", "','"]
                continue
            if word == "WHERE":
                once(tok, word)
                self.advance()
                where, stop = _scan_predicate(self.src, tok.end)
                self.cursor = stop
                if not where:
                    self.fail(self.peek(), ["a predicate"])
                self.last_end = len(self.src[:stop].rstrip())
                extra = []
            elif word == "SINCE":
                once(tok, word)
                self.advance()
                since = self.time()
                extra = []
            elif word == "UNTIL":
                once(tok, word)
                self.advance()
                until = self.time()
                extra = []
            elif word == "ORDER":
                once(tok, word)
                self.advance()
                self.expect("BY", ["ORDER BY"])
                col = self.peek()
                if not (
                    (col.kind in ("word", "qident") and _COLUMN.fullmatch(col.text))
                    and not (col.kind == "word" and col.upper() in ("FOR", "WHERE", *_PREDICATE_STOP))
                ):
                    self.fail(col, ["a column name ([A-Za-z0-9_]+)"])
                self.advance()
                order_by = col.text
                extra = ["ASC", "DESC"]
                if self.at("ASC", "DESC"):
                    descending = self.advance().upper() == "DESC"
                    extra = []
            elif word == "LIMIT":
                once(tok, word)
                self.advance()
                limit, num = self.integer("LIMIT")
                if limit < 1:
                    self.semantic(num, f"LIMIT must be at least 1, not {limit}", "AQL0402")
                extra = []
            elif word == "INCLUDING":
                once(tok, word)
                self.advance()
                self.expect("RETRACTED", ["INCLUDING RETRACTED"])
                retracted = True
                extra = []
            else:
                self.trailing = [*extra, *remaining()]
                return Show(
                    target,
                    tuple(filters),
                    where,
                    since,
                    until,
                    order_by,
                    descending,
                    limit,
                    retracted,
                    subject,
                    between,
                )


# --------------------------------------------------------------------------- entry points


def parse(text: str) -> Statement:
    """Parse one AttemptQL statement; raise :class:`ParseError` if it is not one."""
    return _Parser(text).statement()


def is_attemptql(text: str) -> bool:
    """Is this text meant as AttemptQL rather than SQL?

    True when the first word (after blanks and ``--`` comments) is WHY,
    TRACE, STATE, DIFF or WHAT, or SHOW followed by a target word, possibly
    behind EXPLAIN; False for SQL (SELECT, WITH, SHOW TABLES, EXPLAIN SELECT…).
    """
    words: list[str] = []
    pos = 0
    try:
        while len(words) < 3:
            tok = _lex(text, pos)
            if tok.kind != "word":
                break
            words.append(tok.upper())
            pos = tok.end
    except ParseError:
        pass
    if words[:1] == ["EXPLAIN"]:
        words = words[1:]
    if not words:
        return False
    if words[0] in ("WHY", "TRACE", "STATE", "DIFF", "WHAT"):
        return True
    return words[0] == "SHOW" and len(words) > 1 and words[1] in _TARGET_WORDS
