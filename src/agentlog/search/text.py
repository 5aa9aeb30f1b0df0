"""What the full-text index sees of an event, and how a query is parsed into terms.

**Indexed text.** An event's ``text`` (a prompt), every string inside its
``content`` (commands, tool input and output, assistant messages, errors), its
paths and its tool name: all of it up to :data:`HEAD_CHARS` + :data:`TAIL_CHARS`
characters, else its first :data:`HEAD_CHARS` and its last :data:`TAIL_CHARS`
(an error is usually at the end of a long output; the whole text made the
index 57 % larger, past its size target: docs/search.md). The index's
tokenizer (:func:`.index.analyzer`) splits on every non-alphanumeric
character, so ``parse_config``, ``parse-config``, ``src/app/parse.rs`` and
``agentlog.store.ingest`` are already findable by their parts. What it
cannot see is a camelCase boundary, or the whole of a compound: so each
identifier adds, once, what the tokens lack — its camelCase parts
(``ParseConfig`` → ``parse config``) and its parts joined (``parse_config``
→ ``parseconfig``). Any spelling of a name then finds every other:
``ParseConfig``, ``parse_config`` and ``parse-config`` are one name.

**Queries** (:func:`parse_query`): words (all must match), ``"exact
phrase"``, ``-excluded``, ``OR`` between two terms, a ``prefix*``, and the
filters ``tool:``, ``kind:``, ``path:`` (a glob), ``project:``, ``session:``,
``machine:`` (sessions a vault pull brought from that machine: its id or host,
or a prefix), ``since:`` and ``until:``. Every word is reduced to its tokens by the same
rules as the text; the engine's query is built from those terms
(:mod:`.service`), so nothing a person types — quotes, parentheses,
``NEAR``, ``*``, field names — is engine syntax unless the grammar above
says so.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.core import UsageError

HEAD_CHARS: Final = 4_096
"""Characters of an event's text indexed from its start, when it is longer than both ends."""
TAIL_CHARS: Final = 4_096
"""Characters of an event's text indexed from its end, when it is longer than both ends."""
_TOKEN: Final = re.compile(r"[^\W_]+", re.UNICODE)
_WORD_END: Final = re.compile(r"[^\W_]+\Z")
_WORD_START: Final = re.compile(r"\A[^\W_]+")
_COMPOUND: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*[A-Za-z0-9]")
"""A run that may be a compound identifier (``parts`` decides: more than one part); paths and
dotted names are split at ``/``, ``.`` and ``:`` into their identifiers."""
_CAMEL: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_HEX: Final = re.compile(r"(?=[a-fA-F]*[0-9])(?=[0-9]*[a-fA-F])[0-9a-fA-F]{8,}")
"""A digest, an id, a hash (8 or more hex digits, letters and digits both): not split at its
letter/digit boundaries (``4c046beed2a7`` is no ``4 c 046 bee d 2 a 7``)."""


def parts(word: str) -> list[str]:
    """A compound's parts, lower case: ``ParseConfig`` → ``parse``, ``config``; a hex run
    (:data:`_HEX`) is one part."""
    out: list[str] = []
    for piece in _TOKEN.findall(word):
        out.extend(p.lower() for p in ([piece] if _HEX.fullmatch(piece) else _CAMEL.findall(piece) or [piece]))
    return out


def strings_of(value: Any, out: list[str], budget: list[int] | None = None, depth: int = 0) -> None:
    """Every string inside a JSON value (dict values and keys' values, lists), within ``budget``
    characters when given (else all of them)."""
    if (budget is not None and budget[0] <= 0) or depth > 50:
        return
    if isinstance(value, str):
        if budget is None:
            out.append(value)
        else:
            out.append(value[: budget[0]])
            budget[0] -= len(value)
    elif isinstance(value, dict):
        for v in value.values():
            strings_of(v, out, budget, depth + 1)
    elif isinstance(value, list):
        for v in value:
            strings_of(v, out, budget, depth + 1)


def plain(text: str | None, content: Any, paths: list[str] | None, tool: str | None) -> str:
    """An event's text as indexed, without what its identifiers add (:func:`body`): its head and
    its tail (:func:`head_and_tail`)."""
    pieces: list[str] = [s for s in (tool, text, *(paths or [])) if isinstance(s, str) and s]
    strings_of(content, pieces)
    return head_and_tail("\n".join(pieces))


def head_and_tail(joined: str) -> str:
    """``joined`` if it is at most :data:`HEAD_CHARS` + :data:`TAIL_CHARS` long, else its first
    and last characters on two lines, neither ending nor starting with part of a word (a word cut
    by the bound is left out, not indexed as a stub)."""
    if len(joined) <= HEAD_CHARS + TAIL_CHARS:
        return joined
    head, tail = joined[:HEAD_CHARS], joined[-TAIL_CHARS:]
    if joined[HEAD_CHARS - 1].isalnum() and joined[HEAD_CHARS].isalnum():
        head = _WORD_END.sub("", head)
    if joined[-TAIL_CHARS - 1].isalnum() and joined[-TAIL_CHARS].isalnum():
        tail = _WORD_START.sub("", tail)
    return head + "\n" + tail


def additions(joined: str) -> str:
    """What the identifiers of ``joined`` add to its tokens (see the module docstring)."""
    extra = [e for e in map(_expansion, (c for c in dict.fromkeys(_COMPOUND.findall(joined))
                                         if not (c.isalnum() and (c.islower() or c.isupper() or c.isdigit()))))
             if e]  # a plain word (one case, no separator) has nothing to add
    return "\n".join(dict.fromkeys(extra[:2000]))


def body(text: str | None, content: Any, paths: list[str] | None, tool: str | None) -> str:
    """The indexed text of one event (see the module docstring)."""
    joined = plain(text, content, paths, tool)
    extra = additions(joined)
    return joined + ("\n" + extra if extra else "")


@functools.lru_cache(maxsize=1 << 16)
def _expansion(compound: str) -> str:
    """What an identifier adds to the tokens the text already has (they are its pieces between
    ``_`` and ``-``): its camelCase parts, when it has any (``ParseConfig`` → ``parse config``),
    and its parts joined, when it has separators (``parse_config`` → ``parseconfig``), each on a
    line of its own."""
    ps = parts(compound)
    pieces = [p.lower() for p in _TOKEN.findall(compound)]
    out = " ".join(ps) if ps != pieces else ""
    # joined, unless a part is a hex run: a name with an id or digest in it (``run_4c046beed2a7``,
    # a UUID) would add a term of its own, found by no one who does not paste it whole
    whole = "".join(ps) if len(pieces) > 1 and not any(_HEX.fullmatch(p) for p in pieces) else ""
    # on lines of their own: no phrase may run from the parts into the joined form
    return "\n".join(x for x in (out, whole) if x)


# -- queries ---------------------------------------------------------------------------------------

FILTERS: Final = ("tool", "kind", "path", "project", "session", "since", "until", "provider", "machine")


class SearchSyntaxError(UsageError, ValueError):
    """A query that cannot be run (the message says why)."""


@dataclass(frozen=True)
class Term:
    """One word or phrase of a query: its tokens, in order."""

    tokens: tuple[str, ...]
    phrase: bool = False
    """The tokens in order, adjacent (a quoted phrase)."""
    prefix: bool = False
    """The last token is a prefix (``pars*``)."""


@dataclass
class Query:
    clauses: list[list[Term]] = field(default_factory=list)
    """What a hit must match: every clause, each by one of its terms (``a OR b`` is one clause)."""
    excluded: list[Term] = field(default_factory=list)
    """What a hit must not match."""
    filters: dict[str, list[str]] = field(default_factory=dict)
    terms: list[str] = field(default_factory=list)
    """The positive tokens (for highlighting)."""


_WORD: Final = re.compile(r'(-?)(?:(\w+):)?"([^"]*)"?|(\S+)')


def _term(raw: str, phrase: bool) -> Term | None:
    """The term of a word or phrase, or None when it holds no token."""
    prefix = raw.endswith("*") and not phrase
    tokens = parts(raw.rstrip("*")) if not phrase else [p for w in raw.split() for p in parts(w)]
    if not tokens:
        return None
    return Term(tuple(tokens), phrase=phrase, prefix=prefix)


MAX_QUERY: Final = 2000
"""Characters of a query, at most (longer ones are refused)."""


def parse_query(text: str, *, max_len: int = MAX_QUERY) -> Query:
    """``text`` as terms and filters (nothing of it is passed to the engine as syntax);
    raises :class:`SearchSyntaxError`."""
    if not isinstance(text, str):
        raise SearchSyntaxError("a query is text")
    if len(text) > max_len:  # refused, not cut: a cut query (mid-word) would answer another question
        raise SearchSyntaxError(f"a query is at most {max_len:,} characters; this one has {len(text):,}")
    text = "".join(c if c.isprintable() or c in " \t" else " " for c in text)
    q = Query()
    pending_or = False
    for m in _WORD.finditer(text):
        neg, field_name, phrase, bare = m.group(1), m.group(2), m.group(3), m.group(4)
        if bare is not None:
            if bare == "OR":
                pending_or = bool(q.clauses)
                continue
            neg = "-" if bare.startswith("-") and len(bare) > 1 else ""
            bare = bare[1:] if neg else bare
            if ":" in bare and bare.split(":", 1)[0].lower() in FILTERS and bare.split(":", 1)[1]:
                name, value = bare.split(":", 1)
                q.filters.setdefault(name.lower(), []).append(value)
                continue
            got = _term(bare, phrase=False)
        else:
            if field_name and field_name.lower() in FILTERS:
                q.filters.setdefault(field_name.lower(), []).append(phrase)
                continue
            got = _term(phrase, phrase=True)
        if got is None:
            continue
        if neg:
            q.excluded.append(got)
        else:
            if pending_or and q.clauses:
                q.clauses[-1].append(got)
            else:
                q.clauses.append([got])
            whole = (bare if bare is not None else phrase).strip().rstrip("*")
            q.terms.extend(([whole] if whole and len(got.tokens) > 1 else []) + list(got.tokens))  # as typed, then parts
        pending_or = False
    if not q.clauses:
        if q.excluded:
            raise SearchSyntaxError("a query needs at least one word to look for, not only exclusions")
        if not q.filters:
            raise SearchSyntaxError("nothing to search for: give words, a \"phrase\" or a filter such as tool:Bash")
    return q


__all__ = ["FILTERS", "HEAD_CHARS", "MAX_QUERY", "TAIL_CHARS", "Query", "SearchSyntaxError", "Term", "additions", "body",
           "head_and_tail", "parse_query", "parts", "plain"]
