"""JSON outside the hook path: orjson, with the standard library where orjson
cannot say the same thing (not on the hook path, which uses
:mod:`agentlog.core.fastjson`; importing this module imports ``orjson``, so
start-up paths that avoid it import this module where they need it).

- :func:`loads`: orjson; what it refuses (lone surrogates in ``\\u`` escapes,
  ``NaN``) is parsed by the standard library, whose error is the one raised
  when neither can. (orjson reads integers beyond 64 bits as floats.)
- :func:`dumps`: compact UTF-8 bytes, keys as given or sorted.
- :func:`dumps_pretty`: the text the CLI prints for ``--json`` (the standard
  library's ``indent=2``, non-ASCII kept, anything else as ``str``): orjson
  writes floats (``1e-05``), ``datetime``s and non-string keys differently.
- :func:`read_json`: a JSON file's value, or a default when it is missing,
  unreadable or not JSON.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

_RAISE: Final = object()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The value of the JSON ``data``; ValueError (a ``json.JSONDecodeError``,
    or a ``UnicodeDecodeError`` for bytes that are not text) if it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        import json

        return json.loads(bytes(data) if isinstance(data, memoryview) else data)


def dumps(obj: Any, *, sort_keys: bool = False) -> bytes:
    """``obj`` as compact JSON (UTF-8, no spaces); TypeError for what orjson cannot write."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) if sort_keys else orjson.dumps(obj)


def dumps_pretty(obj: Any) -> str:
    """``obj`` as the CLI prints it: ``json.dumps(obj, ensure_ascii=False, indent=2, default=str)``."""
    import json

    return json.dumps(obj, ensure_ascii=False, indent=2, default=str)


def read_json(path: str, default: Any = _RAISE) -> Any:
    """The value of the JSON file at ``path``. Without ``default`` an unreadable
    file raises OSError and one that is not JSON ValueError; with it, either
    returns ``default``."""
    try:
        with open(path, "rb") as fh:
            return loads(fh.read())
    except (OSError, ValueError):
        if default is _RAISE:
            raise
        return default


__all__ = ["dumps", "dumps_pretty", "loads", "read_json"]
