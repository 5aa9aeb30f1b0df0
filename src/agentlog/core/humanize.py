"""Numbers for people: byte counts (standard library only, no imports)."""

from __future__ import annotations


def fmt_bytes(n: float) -> str:
    """A byte count in binary units, one decimal (bytes none): ``512 B``,
    ``1.5 KiB``, ``12.3 MiB``, ``1,536.0 GiB`` (GiB is the largest unit)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


__all__ = ["fmt_bytes"]
