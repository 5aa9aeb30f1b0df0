"""The shared helpers of ``agentlog.core``: atomic file replacement, JSON, byte sizes, times."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.core import fileio, jsonio
from agentlog.core.fileio import Discard, atomic_writer, dir_size, dir_usage, write_atomic, write_json_atomic
from agentlog.core.humanize import fmt_bytes
from agentlog.core.timefmt import MAX_US, MIN_US, display_us, format_datetime, format_us

# -- atomic replacement -------------------------------------------------------------------


def _leftovers(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("durable", [True, False])
def test_write_atomic_replaces_with_mode_0600(tmp_path: Path, durable: bool) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"old")
    os.chmod(path, 0o644)
    write_atomic(str(path), b"new", durable=durable)
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _leftovers(tmp_path) == []


def test_write_atomic_mode_is_exact_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_atomic(str(tmp_path / "a"), b"x", 0o644)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o644


def test_durable_fsyncs_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("file"))
    monkeypatch.setattr(fileio, "fsync_path", lambda p: calls.append(f"dir {p}"))
    write_atomic(str(tmp_path / "a"), b"x")
    assert calls == ["file", f"dir {tmp_path}"]
    calls.clear()
    write_atomic(str(tmp_path / "a"), b"y", durable=False)
    assert calls == []


def test_an_error_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_writer(str(path)) as fh:
            fh.write(b"half of the new")
            raise RuntimeError("boom")
    assert path.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_a_failed_rename_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "d"
    target.mkdir()
    (target / "x").write_bytes(b"")  # os.replace of a file over a non-empty directory fails
    with pytest.raises(OSError):
        write_atomic(str(target), b"data")
    assert _leftovers(tmp_path) == []


def test_unwritable_data_leaves_no_temp_file(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        write_json_atomic(str(tmp_path / "f.json"), {"x": object()})
    assert list(tmp_path.iterdir()) == []


def test_discard_keeps_the_target_quietly(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with atomic_writer(str(path)) as fh:
        fh.write(b"new")
        raise Discard
    assert path.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_streamed_writer_and_suffix(tmp_path: Path) -> None:
    path = tmp_path / "seg"
    seen: list[str] = []
    with atomic_writer(str(path), 0o600, durable=False, suffix=".purge.seal.tmp") as fh:
        seen = os.listdir(tmp_path)
        for i in range(3):
            fh.write(b"%d" % i)
    assert len(seen) == 1 and seen[0].startswith(".seg.") and seen[0].endswith(".purge.seal.tmp")
    assert path.read_bytes() == b"012"
    assert _leftovers(tmp_path) == []


def test_two_writers_of_one_file_do_not_share_a_temp_file(tmp_path: Path) -> None:
    path = str(tmp_path / "config.toml")
    with atomic_writer(path) as a, atomic_writer(path) as b:
        a.write(b"a = 1\n")
        b.write(b"b = 2\n")
        assert len(_leftovers(tmp_path)) == 2
    assert Path(path).read_bytes() == b"a = 1\n"  # the last to finish wins, whole
    assert _leftovers(tmp_path) == []


def test_write_json_atomic_is_jsonio_dumps(tmp_path: Path) -> None:
    value = {"b": [1, 2.5, None], "a": "é\u2028", "c": {"z": 1, "y": True}}
    write_json_atomic(str(tmp_path / "u.json"), value, durable=False)
    write_json_atomic(str(tmp_path / "s.json"), value, sort_keys=True)
    assert (tmp_path / "u.json").read_bytes() == orjson.dumps(value)
    assert (tmp_path / "s.json").read_bytes() == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def test_dir_usage_counts_files_not_links(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 5)
    os.symlink(tmp_path / "a", tmp_path / "sub" / "link")
    link_size = os.lstat(tmp_path / "sub" / "link").st_size
    assert dir_usage(str(tmp_path)) == (15 + link_size, 3)
    assert dir_size(str(tmp_path)) == 15 + link_size
    assert dir_usage(str(tmp_path / "missing")) == (0, 0)


# -- JSON ---------------------------------------------------------------------------------


def test_loads_reads_what_orjson_refuses() -> None:
    assert jsonio.loads(b'{"a":[1,"x"]}') == {"a": [1, "x"]}
    assert jsonio.loads('"\\ud800"') == "\ud800"  # a lone surrogate escape
    assert jsonio.loads(memoryview(b'"\\udc80"')) == "\udc80"
    nan = jsonio.loads(b"[NaN]")[0]  # the stdlib's extension
    assert nan != nan
    with pytest.raises(ValueError):
        jsonio.loads(b"{nope")
    with pytest.raises(ValueError):
        jsonio.loads(b"\xff")


def test_read_json(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_bytes(b'{"k": [1]}')
    bad.write_bytes(b"{")
    assert jsonio.read_json(str(good)) == {"k": [1]}
    assert jsonio.read_json(str(bad), {}) == {}
    assert jsonio.read_json(str(tmp_path / "missing"), None) is None
    assert jsonio.read_json(str(tmp_path), "dir") == "dir"
    with pytest.raises(ValueError):
        jsonio.read_json(str(bad))
    with pytest.raises(FileNotFoundError):
        jsonio.read_json(str(tmp_path / "missing"))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_dumps_pretty_is_what_print_json_printed(value: Any) -> None:
    assert jsonio.dumps_pretty(value) == json.dumps(value, ensure_ascii=False, indent=2, default=str)


def test_dumps_pretty_stays_on_the_stdlib_where_orjson_differs() -> None:
    """Why ``dumps_pretty`` is not orjson's OPT_INDENT_2: it would change what ``--json`` prints."""
    cases: list[Any] = [{"a": 1e-05}, {"t": datetime(2024, 1, 1, tzinfo=timezone.utc)}, {"n": float("nan")},
                        {"big": 2**70}]
    for value in cases:
        old = json.dumps(value, ensure_ascii=False, indent=2, default=str)
        assert jsonio.dumps_pretty(value) == old
        try:
            other = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
        except TypeError:
            continue
        assert other != old


def test_print_json_output_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    from agentlog.cli.output import print_json

    value = {"é": [1, 1e-05, None, {"d": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)}], "b": True, "e": {}}
    print_json(value)
    assert capsys.readouterr().out == json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n"


# -- byte sizes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"),
    (1, "1 B"),
    (1023, "1,023 B"),
    (1024, "1.0 KiB"),
    (1536, "1.5 KiB"),
    (100_000, "97.7 KiB"),
    (1024**2 - 1, "1,024.0 KiB"),
    (1024**2, "1.0 MiB"),
    (5 * 1024**2 + 1024**2 // 4, "5.2 MiB"),
    (1024**3, "1.0 GiB"),
    (1536 * 1024**3, "1,536.0 GiB"),
    (1024**5, "1,048,576.0 GiB"),
])
def test_fmt_bytes(n: int, text: str) -> None:
    assert fmt_bytes(n) == text


# -- times --------------------------------------------------------------------------------

_UTC = timezone.utc


def _old_iso(us: int) -> str:
    """``query/views.py iso`` before ``core.timefmt``: float seconds through ``datetime``."""
    return datetime.fromtimestamp(us / 1_000_000, tz=_UTC).isoformat().replace("+00:00", "Z")


def _old_format_us(us: int) -> str:
    """``query/timeexpr.py format_us`` before ``core.timefmt``: exact ``timedelta`` arithmetic."""
    dt = datetime(1970, 1, 1, tzinfo=_UTC) + timedelta(microseconds=us)
    head = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    return head + (f".{dt.microsecond:06d}" if dt.microsecond else "") + "Z"


# float seconds hold every µs exactly (half an ulp under 0.5 µs) while |seconds| < 2**32:
# 1833-11-24 … 2106-02-07, where the old float path was right
_FLOAT_EXACT = 2**32 * 1_000_000 - 1


@settings(max_examples=2000, deadline=None)
@given(st.integers(min_value=-_FLOAT_EXACT, max_value=_FLOAT_EXACT))
def test_format_us_equals_the_datetime_text(us: int) -> None:
    assert format_us(us) == _old_iso(us) == _old_format_us(us)


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=MIN_US, max_value=MAX_US))
def test_format_us_equals_the_old_arithmetic_everywhere(us: int) -> None:
    text = format_us(us)
    assert text == _old_format_us(us)
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert (parsed - datetime(1970, 1, 1, tzinfo=_UTC)) // timedelta(microseconds=1) == us
    assert display_us(us) == text.replace("T", " ")[:19]


_ZONES: st.SearchStrategy[Any] = st.none() | st.just(_UTC) | st.builds(
    lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439))


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=_ZONES))
def test_format_datetime_equals_the_old_engram_text(dt: datetime) -> None:
    v = dt if dt.tzinfo else dt.replace(tzinfo=_UTC)
    assert format_datetime(dt) == v.astimezone(_UTC).isoformat().replace("+00:00", "Z")


def test_format_us_examples_and_range() -> None:
    assert format_us(0) == "1970-01-01T00:00:00Z"
    assert format_us(1_764_514_800_123_000) == "2025-11-30T15:00:00.123000Z"
    assert display_us(1_764_514_800_123_000) == "2025-11-30 15:00:00"
    assert format_us(MIN_US) == "0001-01-01T00:00:00Z"
    assert format_us(MAX_US) == "9999-12-31T23:59:59.999999Z"
    for bad in (MIN_US - 1, MAX_US + 1):
        with pytest.raises(ValueError):
            format_us(bad)


def test_query_wrappers_keep_their_errors() -> None:
    from agentlog.query.timeexpr import TimeError
    from agentlog.query.timeexpr import format_us as query_format_us
    from agentlog.query.views import iso

    assert query_format_us(86_400_000_000) == "1970-01-02T00:00:00Z"
    with pytest.raises(TimeError):
        query_format_us(MAX_US + 1)
    assert iso(1_500_000) == "1970-01-01T00:00:01.500000Z"
    assert iso(None) is None
