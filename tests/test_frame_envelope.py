"""The frame envelope check (``log.frame._envelope``, two compiled patterns) accepts and
reads exactly what its first, step-by-step form did: that form is kept here as the
specification and both are run over frames mutated at random."""

from __future__ import annotations

from hashlib import sha256

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.log import frame as f
from agentlog.log.frame import EVENT_MARK, PURGED_MARK, FrameError

HEX = frozenset(b"0123456789abcdef")


def reference(buf: bytes, start: int, end: int, body_mark: bytes) -> tuple[int, bytes, bytes, int, int]:
    if end - start < f.PREV_END + f.TRAILER + 16 or not buf.startswith(f.PREFIX, start) \
            or not buf.startswith(f.SUFFIX, end - 3):
        raise FrameError("not_a_frame")
    mark = end - f.TRAILER
    if not buf.startswith(f.HASH_MARK, mark) or not buf.startswith(f.SEQ_MARK, start + f.PREV_END):
        raise FrameError("not_a_frame")
    seq_start = start + f.PREV_END + len(f.SEQ_MARK)
    seq_end = buf.find(body_mark, seq_start, seq_start + 21)
    if seq_end < 0:
        raise FrameError("not_a_frame")
    digits = buf[seq_start:seq_end]
    claimed = buf[mark + len(f.HASH_MARK) : end - len(f.SUFFIX)]
    prev = buf[start + f.PREV_START : start + f.PREV_END]
    if not digits.isdigit() or not HEX.issuperset(claimed) or not HEX.issuperset(prev):
        raise FrameError("not_a_frame")
    return int(digits), prev, claimed, seq_end + len(body_mark), mark


def outcome(fn: object, buf: bytes, start: int, end: int, mark: bytes) -> object:
    try:
        return fn(buf, start, end, mark)  # type: ignore[operator]
    except FrameError as e:
        return ("error", str(e))


def a_frame(seq: int, event: bytes) -> bytes:
    return f.seal(seq, sha256(b"p").hexdigest(), event, sha256)[0]


@settings(max_examples=1500, deadline=None)
@given(st.integers(0, 10**13), st.binary(min_size=0, max_size=120), st.lists(
    st.tuples(st.integers(0, 400), st.sampled_from([b"", b"0", b"9", b"a", b"F", b",", b'"', b"\n", b",\"event\":",
                                                     b",\"purged\":", b"x" * 3])), max_size=3),
       st.binary(max_size=3), st.binary(max_size=3), st.sampled_from([EVENT_MARK, PURGED_MARK]))
def test_the_patterns_agree_with_the_step_by_step_check(seq: int, body: bytes, edits: list[tuple[int, bytes]],
                                                        before: bytes, after: bytes, mark: bytes) -> None:
    line = a_frame(seq, b'{"e":' + repr(body).encode() + b"}")
    if mark == PURGED_MARK:
        line = line.replace(EVENT_MARK, PURGED_MARK, 1)
    for at, text in edits:  # overwrite or insert a few bytes somewhere
        at = at % (len(line) + 1)
        line = line[:at] + text + line[at + len(text) // 2:]
    buf = before + line + after
    start, end = len(before), len(before) + len(line)
    assert outcome(f._envelope, buf, start, end, mark) == outcome(reference, buf, start, end, mark)


@pytest.mark.parametrize("seq", [0, 7, 10**11, 10**12 - 1, 10**12])
def test_long_seqs_at_the_edge_of_the_window(seq: int) -> None:
    line = a_frame(seq, b'{"e":1}')
    for mark in (EVENT_MARK, PURGED_MARK):
        probe = line if mark == EVENT_MARK else line.replace(EVENT_MARK, PURGED_MARK, 1)
        assert outcome(f._envelope, probe, 0, len(probe), mark) == outcome(reference, probe, 0, len(probe), mark)
