"""JSON for the hook path, built straight on the `_json` C accelerator.

`import json` pulls in `re` and `enum` and costs several milliseconds per hook
process on a slow machine; the C scanner and encoder that `json` itself uses
are in `_json` and need neither. Output is compact (`,` and `:`), keeps
non-ASCII characters as UTF-8, and rejects NaN/Infinity like strict JSON.
Falls back to `json` where `_json` is missing (other Pythons).
"""

from __future__ import annotations

from agentlog.core import AgentlogError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]


class DecodeError(AgentlogError, ValueError):
    """Input is not one JSON document."""


def _reject_constant(name: str) -> Any:
    raise DecodeError(f"invalid JSON constant {name}")


class _Context:
    """The attributes `_json.make_scanner` reads from a JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_reject_constant)
    memo: dict[str, str] = {}


_WS = " \t\n\r"

if _json is not None:
    _scan = _json.make_scanner(_Context())  # type: ignore[arg-type]
    _make_encoder: Any = _json.make_encoder  # typeshed wants callables where None is allowed
    _encode = _make_encoder(
        None,  # markers: no cycle detection needed for parsed data
        None,  # default: unknown types are a bug, let it raise
        _json.encode_basestring,  # ensure_ascii=False
        None,  # indent
        ":",
        ",",
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )

    def loads(text: str) -> Any:
        """Parse one JSON document (leading/trailing whitespace allowed)."""
        n = len(text)
        i = 0
        while i < n and text[i] in _WS:
            i += 1
        try:
            value, end = _scan(text, i)
        except StopIteration as e:
            raise DecodeError(f"expecting a value at char {e.value}") from None
        except ValueError as e:
            raise DecodeError(str(e)) from None
        except SystemError:
            # The C scanner builds its error by importing json.decoder; when
            # that module is not loaded (the hook never loads it) CPython 3.11
            # reports a SystemError instead. The input is invalid either way.
            raise DecodeError("invalid JSON") from None
        while end < n and text[end] in _WS:
            end += 1
        if end != n:
            raise DecodeError(f"extra data at char {end}")
        return value

    _encode_ascii = _make_encoder(
        None, None, _json.encode_basestring_ascii, None, ":", ",", False, False, False
    )

    def dumps(value: Any) -> str:
        """Serialise compactly; non-ASCII stays as is."""
        return "".join(_encode(value, 0))

    def dumps_bytes(value: Any) -> bytes:
        """Serialise to UTF-8 bytes. Lone surrogates (legal in JSON escapes,
        illegal in UTF-8) make the whole value fall back to ASCII escapes."""
        try:
            return "".join(_encode(value, 0)).encode("utf-8")
        except UnicodeEncodeError:
            return "".join(_encode_ascii(value, 0)).encode("ascii")

else:  # pragma: no cover
    import json as _std

    def loads(text: str) -> Any:
        try:
            return _std.loads(text, parse_constant=_reject_constant)
        except ValueError as e:
            raise DecodeError(str(e)) from None

    def dumps(value: Any) -> str:
        return _std.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def dumps_bytes(value: Any) -> bytes:
        try:
            return dumps(value).encode("utf-8")
        except UnicodeEncodeError:
            return _std.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")
