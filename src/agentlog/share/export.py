"""Making a shared file (docs/share.md): the view of a target, sanitised, laid out, sealed.

The caller proves the target's session first (``operations.proofs.prove_signed``: the bundle and
the key that signed its checkpoint) and passes both in; this package, beside ``operations``,
cannot call it itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Iterable

from agentlog.integrity.note import Signer
from agentlog.share.sanitize import Sanitizer
from agentlog.share.view import Target, build

FORMATS: Final = ("html", "markdown")


@dataclass(frozen=True)
class Shared:
    """A shared file made: its text, what was removed (count by rule), and what it shows."""

    text: str
    removed: dict[str, int]
    kind: str
    id: str
    frames: int
    fmt: str

    def summary(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "format": self.fmt, "frames": self.frames,
                "bytes": len(self.text.encode("utf-8")), "removed": dict(sorted(self.removed.items())),
                "removed_total": sum(self.removed.values())}


def export(t: Target, bundle: dict[str, Any], signer: Signer, *, fmt: str = "html", redact_paths: bool = False,
           patterns: Iterable[str] = ()) -> Shared:
    """The shared file of target ``t`` in format ``fmt`` (``html`` or ``markdown``), from the proof
    bundle of its session, whose checkpoint ``signer`` signed."""
    from agentlog.share import html_page, markdown_page
    from agentlog.share.seal import seal

    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {FORMATS}")
    clean = Sanitizer(redact_paths=redact_paths, patterns=patterns)
    view, shown = build(t, bundle, clean)
    counts = dict(clean.counts)
    before, after = (html_page if fmt == "html" else markdown_page).page(view, counts)
    text = seal(before, after, bundle, [(s.log, s.seq) for s in shown], signer)
    return Shared(text, counts, t.kind, t.display, len(shown), fmt)


__all__ = ["FORMATS", "Shared", "export"]
