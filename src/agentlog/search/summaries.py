"""Turn summaries in the semantic index: one vector for what a turn asked, what failed in it and
how it ended, placed at the events it sums up.

People ask about a turn as a whole ("when did we make it read Google's assistant logs?"), and
its words are spread over its events: the prompt says what was wanted, a failed call's error what
went wrong, the last assistant message what was done about it. Each of those events has its own
vector; a turn's **summary** is the sum of its members' vectors, at unit length — with a static,
mean-pooled model (wordllama) that is close to embedding their texts joined, each member weighted
alike so a long error does not drown the prompt. A turn of the log is a prompt and every chunk
after it up to the next prompt (the chunks before a log's first prompt are a turn of their own);
its members are the prompt, the first and last :data:`FAILURES` of its failures (failed calls,
failed turns, denied permissions), its commits, and its last assistant message.

**Keys.** A summary is keyed by its turn's first event (``log``, ``seq``) in a log name of its own
(:data:`PREFIX` before the event's log), and keeps its members' ``seq``: a hit on a summary is a
hit on each of its members (:func:`expand`), placed as they are. It is built from the vectors the
index already holds (no text is read again), so it follows what they follow: a catch-up
recomputes the summaries of the logs it touched, and a purge or retraction that removes a member
recomputes them without it (or drops the summary when fewer than two members are left) — no
summary keeps anything of removed content.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np

PREFIX: Final = "turn|"
"""Before a log's name in a summary's key (a log is ``provider/key``: never holds ``|``)."""
SUMMARY: Final = "T"
FAILURES: Final = 3
"""Failures of a turn in its summary: the first and the last this many."""

ROLE_OF_KIND: Final = {"prompt_submitted": "p", "agent_message": "m", "turn_stopped": "m", "tool_call_failed": "f",
                       "turn_failed": "f",
                       "permission_denied": "f", "tool_call_started": "c"}
"""An event chunk's role in its turn (the only embedded ``tool_call_started`` is a commit)."""


def role(kind: str | None) -> str:
    return ROLE_OF_KIND.get(kind or "", "o")


def is_summary(key: tuple[str, int]) -> bool:
    return key[0].startswith(PREFIX)


def log_of(key: tuple[str, int]) -> str:
    return key[0][len(PREFIX):] if is_summary(key) else key[0]


def members(rows: Sequence[tuple[int, str]]) -> list[list[int]]:
    """A log's turns' members, as ``seq``: ``rows`` are its event chunks' ``(seq, role)``, any order."""
    turns: list[list[tuple[int, str]]] = []
    for seq, r in sorted(rows):
        if r == "p" or not turns:
            turns.append([])
        turns[-1].append((seq, r))
    out: list[list[int]] = []
    for turn in turns:
        failures = [s for s, r in turn if r == "f"]
        if len(failures) > 2 * FAILURES:
            failures = failures[:FAILURES] + failures[-FAILURES:]
        messages = [s for s, r in turn if r == "m"]
        picked = {s for s, r in turn if r in ("p", "c")} | set(failures) | set(messages[-1:])
        if len(picked) >= 2:
            out.append(sorted(picked))
    return out


def build(rows: Iterable[tuple[str, int, str, np.ndarray]]) -> tuple[list[np.ndarray], list[tuple[str, int]],
                                                                      list[list[Any]]]:
    """The summaries of the logs whose event chunks are ``rows`` (``log``, ``seq``, role, int8
    vector): their unit vectors (float32), keys and the rows' extra fields (:data:`SUMMARY` and
    the members)."""
    import numpy as np

    by_log: dict[str, dict[int, tuple[str, np.ndarray]]] = {}
    for log, seq, r, vector in rows:
        by_log.setdefault(log, {})[seq] = (r, vector)
    vectors: list[np.ndarray] = []
    keys: list[tuple[str, int]] = []
    extra: list[list[Any]] = []
    for log in sorted(by_log):
        held = by_log[log]
        for turn in members([(s, r) for s, (r, _) in held.items()]):
            total = np.sum([held[s][1].astype(np.float32) for s in turn], axis=0)
            norm = float(np.linalg.norm(total))
            if not norm:
                continue
            vectors.append(total / norm)
            keys.append((PREFIX + log, turn[0]))
            extra.append([SUMMARY, turn])
    return vectors, keys, extra


def expand(found: Iterable[tuple[float, tuple[str, int]]], extra: dict[tuple[str, int], list[int]],
           exclude: frozenset[tuple[str, int]] = frozenset()) -> list[tuple[float, tuple[str, int]]]:
    """Ranked vectors as ranked events: a summary's hit scores each of its members (in their order:
    prompt first), an event keeps its best score; a summary holding an excluded event is left out."""
    best: dict[tuple[str, int], float] = {}
    order: dict[tuple[str, int], int] = {}
    for score, key in found:
        if is_summary(key):
            log = log_of(key)
            inner = [(log, s) for s in extra.get(key, ())]
            if any(k in exclude for k in inner):
                continue
        else:
            inner = [key]
        for k in inner:
            if k in exclude:
                continue
            if score > best.get(k, -2.0):
                best[k] = score
            order.setdefault(k, len(order))
    return sorted(((s, k) for k, s in best.items()), key=lambda x: (-x[0], order[x[1]]))


__all__ = ["FAILURES", "PREFIX", "SUMMARY", "build", "expand", "is_summary", "log_of", "members", "role"]
