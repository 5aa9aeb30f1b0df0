"""Stored text reaches a terminal escaped: no escape sequence, bidi override or markup acts."""

from __future__ import annotations

from agentlog.cli.output import print_table, terminal_safe


def test_control_and_format_characters_are_shown_escaped() -> None:
    assert terminal_safe("plain text, ünïcode ✓") == "plain text, ünïcode ✓"
    assert terminal_safe("a\x1b[31mred\x1b[0m") == "a\\x1b[31mred\\x1b[0m"
    assert terminal_safe("x\u202eevil") == "x\\u202eevil"  # right-to-left override
    assert terminal_safe("line\nnext\ttab") == "line\nnext\ttab"
    assert terminal_safe(None) == ""


def test_tables_print_stored_text_inert(capsys: object) -> None:
    print_table([{"objective": "[red]not markup[/red] \x1b]0;title\x07"}], ["objective"])
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "\x1b" not in out and "\x07" not in out  # no raw escape reaches the terminal
    assert "\\x1b" in out  # it is shown, escaped
    assert "[red]not markup[/red]" in out
