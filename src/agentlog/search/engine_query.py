"""The tantivy query a parsed search query is (:func:`engine_query`), and the check a phrase or
compound's candidates must pass on their text (:class:`Checker`: the index keeps no positions).
Split from :mod:`.service`, which ranks and presents the hits."""

from __future__ import annotations

import functools
import re
import time
from typing import Any, Final

from agentlog.search.text import Query, SearchSyntaxError, Term

_REGEX_META: Final = frozenset("\\.+*?()|[]{}^$#&-~")
"""The characters a tantivy (Rust) regex gives a meaning to; others must not be escaped (``\\<`` is
an assertion there)."""


def regex_literal(text: str) -> str:
    """``text`` matched literally in a tantivy regex."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def _glob(pattern: str) -> str:
    """A path glob (``*`` any characters, ``?`` one) as a tantivy regex matching a path's end."""
    out = "".join(".*" if c == "*" else "." if c == "?" else regex_literal(c) for c in pattern)
    return "(.*/)?" + out


def engine_query(q: Query, sessions: dict[str, list[tuple[str, str]]] | None = None,
                  machines: dict[str, list[str]] | None = None) -> tuple[Any, bool, Checker | None]:
    """``q`` as a tantivy query built from its parts (no text of it is parsed by tantivy),
    whether it ranks (False: filters only, newest first), and the check its candidates must pass
    when it has phrases or compounds (the index keeps no positions: their order is checked on
    the event's text). ``sessions``: per ``session:`` value, the provider sessions it names by
    our id (:func:`_sessions`); ``machines``: per ``machine:`` value, the logs pulled from the
    machines it names (:func:`_machine_logs`)."""
    import tantivy

    from agentlog.query.timeexpr import TimeError, resolve
    from agentlog.search.index import fold_term, schema

    sc = schema()
    Q, Occur = tantivy.Query, tantivy.Occur


    def regex(field: str, pattern: str, what: str, value: str) -> Any:
        try:
            return Q.regex_query(sc, field, pattern)
        except ValueError as e:  # tantivy refuses a pattern its regex engine cannot hold (a very long value)
            shown = repr(value[:40]) + ("…" if len(value) > 40 else "")
            why = str(e).split(":")[-1].strip(" '")
            raise SearchSyntaxError(f"{what}: {shown} is too long or too complex to search ({why})") from None

    def word(token: str, prefix: bool) -> Any:
        return regex("body", regex_literal(token) + ".*", "the word", token) if prefix \
            else Q.term_query(sc, "body", token)

    def text_query(term: Term) -> Any:
        toks = term.tokens
        if len(toks) == 1:
            return word(toks[0], term.prefix)
        every = Q.boolean_query([(Occur.Must, word(t, term.prefix and i == len(toks) - 1)) for i, t in enumerate(toks)])
        if term.phrase:
            return every
        # a compound: its parts (their order checked), or its parts joined (indexed for such names)
        return Q.boolean_query([(Occur.Should, every), (Occur.Should, word("".join(toks), term.prefix))])

    def any_of(queries: list[Any]) -> Any:
        return queries[0] if len(queries) == 1 else Q.boolean_query([(Occur.Should, x) for x in queries])

    clauses: list[tuple[Any, Any]] = []
    kept: list[list[Term]] = []
    for alternatives in q.clauses:
        terms = [t for t in map(fold_term, alternatives) if t.tokens]
        if terms:
            kept.append(terms)
            clauses.append((Occur.Must, any_of([text_query(t) for t in terms])))
    ranked = bool(clauses)
    excluded = [t for t in map(fold_term, q.excluded) if t.tokens]
    for term in excluded:
        if len(term.tokens) == 1:  # a phrase or compound is excluded by the check
            clauses.append((Occur.MustNot, text_query(term)))
    for name, values in q.filters.items():
        conds: list[Any] = []
        for v in values:
            if name == "tool":
                conds.append(Q.term_query(sc, "tool", v.lower()))
            elif name == "kind":
                conds += [Q.term_query(sc, "kind", v), regex(
                    "kind", regex_literal({"prompt": "prompt_submitted", "tool": "tool_call"}.get(v, v)) + ".*", "kind", v)]
            elif name == "project":
                conds.append(Q.term_query(sc, "project", v))
            elif name == "provider":
                conds.append(Q.term_query(sc, "provider", v.replace("-", "_")))
            elif name == "session":  # the provider's session id or its prefix, or the session our id names
                conds.append(regex("session", regex_literal(v) + ".*", "session", v))
                conds += [Q.boolean_query([(Occur.Must, Q.term_query(sc, "session", sid)),
                                           (Occur.Must, Q.term_query(sc, "provider", provider))])
                          for provider, sid in (sessions or {}).get(v, [])]
            elif name == "machine":  # sessions a vault pull brought from that machine (none: no hit)
                conds += [Q.term_query(sc, "log", log) for log in (machines or {}).get(v, [])] or [Q.empty_query()]
            elif name == "path":
                conds.append(regex("paths", _glob(v), "path", v))
            elif name in ("since", "until"):
                try:
                    us = resolve(v, time.time_ns() // 1000)
                except TimeError as e:
                    raise SearchSyntaxError(f"{name}: {e}") from None
                conds.append(Q.range_query(sc, "t", tantivy.FieldType.Integer, lower_bound=us) if name == "since"
                             else Q.range_query(sc, "t", tantivy.FieldType.Integer, upper_bound=us, include_upper=False))
        if conds:  # a filter does not change a hit's rank
            clauses.append((Occur.Must, Q.const_score_query(any_of(conds), 0.0)))
    if not clauses or (q.clauses and not ranked):  # nothing, or only words too long to be indexed
        return Q.empty_query(), ranked, None
    if not ranked:
        clauses.append((Occur.Must, Q.exists_query("t")))  # events only (not the index's own state)
    multi = any(len(t.tokens) > 1 for t in [*(t for alts in kept for t in alts), *excluded])
    return Q.boolean_query(clauses), ranked, Checker(kept, excluded) if multi else None


_SEP: Final = "\x01"


def _holds(term: Term, tokens: str) -> bool:
    """Whether ``tokens`` (an event's, in order, each between two :data:`_SEP`) hold ``term``:
    its tokens adjacent and in order (or, for a compound, its parts joined)."""
    end = "" if term.prefix else _SEP
    if _SEP + _SEP.join(term.tokens) + end in tokens:
        return True
    return len(term.tokens) > 1 and not term.phrase and _SEP + "".join(term.tokens) + end in tokens


def _pattern(term: Term) -> str:
    """``term`` as a regular expression over an ASCII text in lower case: its tokens as whole
    words, in order, separated by anything but a letter or digit (or its parts joined)."""
    end = "" if term.prefix else "(?![a-z0-9])"

    def word_start(token: str) -> str:  # the literal first (the regex engine then looks for it), then its start
        return re.escape(token) + "(?<![a-z0-9]" + "." * len(token) + ")"

    seq = word_start(term.tokens[0]) + "".join("[^a-z0-9]+" + re.escape(t) for t in term.tokens[1:]) + end
    if len(term.tokens) > 1 and not term.phrase:
        seq += "|" + word_start("".join(term.tokens)) + end
    return seq


class Checker:
    """Whether an event's text holds a query's phrases and compounds in order (and not its
    excluded ones), as its tokens and what its identifiers add (:func:`.text.additions`) say.
    On an ASCII text where no term can come from what identifiers add (none of its terms'
    tokens occur run together, or separated by ``_``s and ``-``s only), a regular expression over the
    text says the same, much faster; on any other such text, its own tokens (identifiers are ASCII
    runs: one that adds a term holds that term's tokens in such a run). A text whose only
    characters beyond ASCII separate tokens (:func:`_separators_only`: an em dash, curly quotes)
    is checked as an ASCII one."""

    def __init__(self, clauses: list[list[Term]], excluded: list[Term]) -> None:
        self.clauses, self.excluded = clauses, excluded
        every = [*(t for alts in clauses for t in alts), *excluded]
        self.loose = [re.compile("[_\\-]*".join(map(re.escape, t.tokens))) for t in every]
        self.patterns = [[re.compile(_pattern(t)) for t in alts] for alts in clauses]
        self.excluded_patterns = [re.compile(_pattern(t)) for t in excluded]

    def __call__(self, text: str) -> bool:
        lowered = text.lower()
        if any(p.search(lowered) for p in self.loose):
            return self.by_tokens(text)
        if not text.isascii() and not _separators_only(text):
            from agentlog.search.index import analyzer

            # no identifier can add a term (each would hold the term's tokens in a loose run):
            # the text's own tokens decide, as the expression does on an ASCII text
            return self._holds_all(_SEP + _SEP.join(analyzer().analyze(text)) + _SEP)
        return all(any(p.search(lowered) for p in alts) for alts in self.patterns) and not any(
            p.search(lowered) for p in self.excluded_patterns)

    def by_tokens(self, text: str) -> bool:
        """The check on the text's tokens and, apart (no adjacency across them), each identifier's
        additions."""
        from agentlog.search.index import analyzer
        from agentlog.search.text import additions

        an = analyzer()
        lines = [text, *additions(text).split("\n")]
        return self._holds_all(_SEP + (_SEP * 2).join(_SEP.join(an.analyze(line)) for line in lines) + _SEP)

    def _holds_all(self, tokens: str) -> bool:
        return all(any(_holds(t, tokens) for t in alts) for alts in self.clauses) and not any(
            _holds(t, tokens) for t in self.excluded)


_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")
SEPARATING: Final = frozenset({"Zs", "Zl", "Zp", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "Cc", "Cf"})
"""Unicode categories whose characters are never part of a token: the tokenizer splits on them
(not alphanumeric), and lower case leaves them no ASCII letter or digit (a test checks every one)."""


def _separators_only(text: str) -> bool:
    """Whether every character of ``text`` beyond ASCII separates tokens (an em dash, a curly
    quote, an arrow …): then the text's tokens are its ASCII runs of letters and digits, and the
    regular expressions of :class:`Checker` say what its tokens would."""
    return all(_separating(c) for c in set(_NON_ASCII.findall(text)))


@functools.lru_cache(maxsize=4096)
def _separating(char: str) -> bool:
    import unicodedata

    return unicodedata.category(char) in SEPARATING


__all__ = ["SEPARATING", "Checker", "engine_query", "regex_literal"]
