"""The shared file as Markdown, for a pull request or an issue (docs/share.md).

Captured text goes only into fenced code blocks (a fence longer than any run of backticks in
it) or, in headings, lists and ``<summary>`` lines, HTML-escaped with Markdown's punctuation
backslash-escaped, so nothing captured becomes a link, an image or markup. The proof block is an
HTML comment at the end, which renderers do not show.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any, Final

from agentlog.share.seal import MARK

_SPECIAL: Final = re.compile(r"([\\`*_{}\[\]()#+!|~]|:(?=//))")


def inline(text: Any) -> str:
    """``text`` as inert inline Markdown: one line, HTML-escaped, punctuation escaped."""
    one = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", escape(one, quote=True))


def fenced(text: str, lang: str = "text") -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _item(item: dict[str, Any]) -> str:
    at = inline(item["at"])
    if item["type"] == "prompt":
        return f"**Prompt** {at}\n\n{fenced(item['text'])}\n"
    if item["type"] == "message":
        return f"**Agent** {at}\n\n{fenced(item['text'])}\n"
    if item["type"] == "event":
        body = f"\n\n{fenced(item['text'])}\n" if item["text"] else ""
        return f"<details><summary>{escape(item['kind'])} {escape(item['at'])}</summary>{body}\n</details>\n"
    bits = [escape(item["name"])] + [escape(str(x)) for x in (item["status"], item["outcome_class"]) if x]
    if item["exit_code"]:
        bits.append(f"exit {escape(item['exit_code'])}")
    if item["brief"]:
        bits.append(f"<code>{escape(item['brief'])}</code>")
    if item["attempt"]:
        bits.append(f"· {escape(item['attempt'])}")
    parts = [f"<details><summary>Tool {' '.join(bits)} {escape(item['at'])}</summary>\n"]
    if item["input"]:
        parts.append(f"input:\n\n{fenced(item['input'], 'yaml')}\n")
    for d in item["diffs"]:
        parts.append(f"diff of {inline(d['path'])}:\n\n{fenced(d['diff'], 'diff')}\n")
    if item["output"]:
        parts.append(f"output:\n\n{fenced(item['output'])}\n")
    parts.append("</details>\n")
    return "\n".join(parts)


def page(view: dict[str, Any], counts: dict[str, int]) -> tuple[str, str]:
    """(the Markdown up to and including the proof block's opening, the rest after the block)."""
    out = [f"# {inline(view['title'])}\n"]
    out += [f"- **{inline(k)}**: {inline(v)}" for k, v in view["meta"]]
    out.append("")
    for turn in view["turns"]:
        status = f" ({inline(turn['status'])})" if turn["status"] else ""
        out.append(f"## {inline(turn['title'])}{status}\n")
        for a in turn["attempts"]:
            extra = ", ".join(inline(x) for x in (a["outcome"], a["failure_class"], a["note"]) if x)
            out.append(f"- {inline(a['label'])}: {extra} ({a['tool_calls']} tool calls)")
        if turn["attempts"]:
            out.append("")
        out.extend(_item(i) for i in turn["items"])
    out.append("## What was removed\n")
    out.append("Sanitised by agentlog's export profile (secrets, home directories, user and host names). "
               "Count by rule:\n")
    out.append("| rule | count |\n|---|---|")
    out += [f"| {inline(rule)} | {n} |" for rule, n in sorted(counts.items())] or ["| nothing | 0 |"]
    out.append("\nThis file carries a proof: `agentlog verify-proof FILE` checks that the shown frames are in the "
               "recorder's signed log and that nothing here was edited after it was made.\n")
    return "\n".join(out) + f"\n<!-- {MARK} ", " -->\n"


__all__ = ["fenced", "inline", "page"]
