"""Which texts could hold a secret: a batch pre-check run before the redactor.

The redactor (:mod:`agentlog.capture.redact`) is standard-library Python for
the hook path; over bulk text (an import of a user's transcripts) it runs at
~25–30 MB/s, while almost no line of a transcript holds a secret. This gate
asks RE2 (through ``pyarrow.compute``, a dependency already) once per batch
whether each text contains anything a redaction rule *needs*, and the
redactor then runs only on the texts it flags — about 0.5 % of transcript
lines, at ~120 MB/s for the gate itself.

The gate is a superset of the redactor, by construction and by test
(``tests/test_secret_gate.py`` checks every rule's examples and a
hypothesis property): every match of a rule contains one of

- a provider token's literal prefix (``AKIA``, ``ghp_``, ``sk-``, ``eyJ`` …:
  every prefix of ``redact._TOKENS``, case-sensitive as there);
- ``-----BEGIN `` (private keys);
- ``://`` then authority bytes then ``@`` (URL credentials);
- a secret keyword (``password``, ``passwd``, ``passphrase``, ``secret``,
  ``token``, ``<api|access|private|secret|encryption|signing|master>[_-]key``,
  ``authorization``; any case) followed by quotes/backslashes, blanks and
  ``=`` or ``:`` — or a ``--flag`` ending in one (``--password value``).

The same pattern holds for a value's JSON text as orjson writes it (only
``"``, ``\\`` and control characters escaped; no ASCII letter, digit or
``_-.:/@`` ever is): the authority may hold backslashes (an escaped control
character) and a blank may be written ``\\t``. So a whole serialised event
can be gated without walking it: :func:`redact_serialized`.

The redactor narrows these further (lengths, word boundaries, values that
are obviously not secret); the gate never does. A change to the rules of
``redact`` must be mirrored here; the tests fail when it is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

_KEYWORDS: Final = (r"passw(?:or)?d|passphrase|secret|token|"
                    r"(?:api|access|private|secret|encryption|signing|master)[_-]?key|authorization")
PATTERN: Final = (
    r"AKIA|ASIA|gh[pousr]_|github_pat_|xox[bpars]-|AIza|[sr]k_(?:live|test)_|sk-|npm_|sbp_|vercel_|glpat-|hf_"
    r"|SG\.|eyJ"
    r"|-----BEGIN "
    r"|://[^ \t\n\r\x0b\x0c/?#\"'`<>]*@"
    r"|(?i:(?:" + _KEYWORDS + r")[\"'\\`]*(?:[ \t]|\\t)*[=:]|--[a-z0-9_.-]*(?:" + _KEYWORDS + r"))"
)
"""RE2 syntax; see the module docstring for what each branch stands for."""


def might_hold_secrets(texts: Sequence[str] | Sequence[bytes]) -> list[bool]:
    """For each text (``str``, or UTF-8/JSON ``bytes``), whether the redactor
    could find anything in it — never a false "no"; a "yes" is only a reason to
    run the redactor."""
    if not texts:
        return []
    if isinstance(texts[0], bytes):
        flags = [False] * len(texts)
        for i in _gate([(t, 0) for t in texts]):  # type: ignore[misc]
            flags[i] = True
        return flags
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    try:
        array = pa.array(texts, pa.large_string())
    except (UnicodeEncodeError, pa.ArrowInvalid, pa.ArrowTypeError):
        # a lone surrogate somewhere: run the redactor on those, gate the others
        flags = [True] * len(texts)
        good = [i for i, t in enumerate(texts) if not isinstance(t, str) or _encodable(t)]
        for i, flag in zip(good, might_hold_secrets([texts[i] for i in good]), strict=True):  # type: ignore[arg-type]
            flags[i] = flag
        return flags
    return [bool(x) for x in pc.match_substring_regex(array, PATTERN).to_pylist()]


def _gate(parts: Sequence[tuple[bytes, int]]) -> list[int]:
    """The indices of the texts ``blob[start:]`` of ``parts`` that :data:`PATTERN`
    matches. The texts are copied once, side by side, into the one buffer the
    Arrow array reads (no slice of a blob is made, nor a Python object per text
    on the way back)."""
    import array

    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = array.array("q", [0])
    end = 0
    for blob, start in parts:
        end += len(blob) - start
        offsets.append(end)
    data = b"".join([memoryview(blob)[start:] if start else blob for blob, start in parts])
    texts = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(parts),
                                             [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    hits = pc.match_substring_regex(texts, PATTERN)
    if not pc.any(hits).as_py():
        return []
    return pc.indices_nonzero(hits).to_pylist()  # type: ignore[no-any-return]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _redactable_start(ev: dict[str, Any], blob: bytes, marks: list[tuple[str, bytes]]) -> int:
    """Where the end of ``blob`` (``ev`` serialised) that holds all of its ``fields``
    starts (see :func:`redact_serialized`); -1 when they hold nothing the redactor
    could change."""
    start = len(blob)
    for field, mark in marks:
        if ev.get(field):
            if blob.startswith(mark[1:], 1):  # the field is the first key: read it all
                return 0
            # a key found after the earliest so far changes nothing: the search stops there
            # (content's key is found before raw's, and raw's is then looked for before it only,
            # not through all of content)
            at = blob.find(mark, 0, start + len(mark) - 1)
            if at < 0:
                if start < len(blob):
                    continue  # its key is after ``start``: its value is in the part already
                return 0
            start = at
    return start if start < len(blob) else -1


def redact_serialized(events: list[dict[str, Any]], fields: tuple[str, ...] = ("content", "raw")) -> list[bytes]:
    """Each wire-form event serialised (compact JSON, key order kept: the hook's
    form), with ``fields`` redacted in place first wherever the gate, run over
    the serialised events, flags one; what the redactor finds is counted into
    the event's ``attrs`` as :func:`agentlog.capture.redact.redact_into` does.

    The gate reads only the part of a serialised event that holds ``fields``:
    they are what the redactor changes (strings inside them; nothing else of the
    event), and an event without them (or with empty ones) is not gated at all.
    That part is the blob from the first ``,"<field>":`` of a field the event
    has to its end. In orjson's compact output those bytes are always an
    object's key of that name, not its first (a ``"`` inside a string is
    written ``\\"``, a closing quote is never followed by a letter, and a
    string followed by ``:`` is a key), so, when the field is not the event's
    first key, the first of them is the field's own key or one nested before
    it: either way the part holds the field's whole value (and all written
    after it, other fields included). When the field is the first key, or its
    key is not found, the whole blob is read. A match of :data:`PATTERN` in
    the value's JSON text is a match in the part (no anchors), so the argument
    above holds as is.

    An event orjson cannot write (a lone surrogate) is redacted without asking
    the gate and written by the standard-library-only encoder."""
    import orjson

    from agentlog.core.fastjson import dumps_bytes
    from agentlog.capture.redact import redact_into

    marks = [(field, b"," + orjson.dumps(field) + b":") for field in fields]
    blobs: list[bytes] = []
    unsure: list[int] = []
    parts: list[tuple[bytes, int]] = []
    gated: list[int] = []
    dumps = orjson.dumps
    for i, ev in enumerate(events):
        try:
            blob = dumps(ev)
        except TypeError:
            blobs.append(b"")
            unsure.append(i)
            continue
        blobs.append(blob)
        start = _redactable_start(ev, blob, marks)
        if start >= 0:
            parts.append((blob, start))
            gated.append(i)
    flagged = set(unsure)
    if parts:
        flagged.update(gated[j] for j in _gate(parts))
    for i in sorted(flagged):
        ev = events[i]
        attrs = ev.get("attrs")
        if not isinstance(attrs, dict):
            attrs = ev["attrs"] = {}
        for field in fields:  # a value given already serialised (importer.base.RawLine): its plain form
            plain = getattr(ev.get(field), "plain", None)
            if callable(plain):
                ev[field] = plain()
        for field, clean in zip(fields, redact_into(attrs, *(ev.get(f) for f in fields)), strict=True):
            if clean is not None:
                ev[field] = clean
        try:
            blobs[i] = orjson.dumps(ev)
        except TypeError:
            blobs[i] = dumps_bytes(ev)
    return blobs


__all__ = ["PATTERN", "might_hold_secrets", "redact_serialized"]
