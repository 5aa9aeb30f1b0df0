"""The shared file as one self-contained HTML page (docs/share.md).

Inline CSS, no external resource of any kind, readable without JavaScript (folding is the
browser's own ``<details>``; the inline script only adds "expand all" and "collapse all"). A
Content-Security-Policy in the page forbids every fetch (``default-src 'none'``) and allows only
that script, by its hash. Every captured string is escaped here, and nothing captured becomes an
attribute, a link or markup.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape
from typing import Any, Final

from agentlog.share.seal import MARK

_SCRIPT: Final = ("document.querySelectorAll('button[data-fold]').forEach(function(b){b.hidden=false;"
                  "b.addEventListener('click',function(){var o=b.getAttribute('data-fold')==='open';"
                  "document.querySelectorAll('details').forEach(function(d){d.open=o;});});});")
_CSP: Final = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'; "
               "script-src 'sha256-" + base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode() + "'")
_CSS: Final = """
body{font:14px/1.45 system-ui,sans-serif;max-width:72rem;margin:1.5rem auto;padding:0 1rem;color:#1d2129;background:#fff}
h1{font-size:1.4rem}h2{font-size:1.15rem;border-top:1px solid #ccd;padding-top:.8rem;margin-top:1.6rem}
h4{margin:.6rem 0 .2rem;font-size:.85rem;color:#555}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem}dl.meta dt{color:#666}dl.meta dd{margin:0}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f5f6f8;border:1px solid #e1e4e8;padding:.5rem;margin:.2rem 0;
font:12px/1.4 ui-monospace,monospace;max-height:40rem;overflow:auto}
.item{margin:.6rem 0}.at{color:#888;font-size:.8rem}.who{font-weight:600}
details{border:1px solid #e1e4e8;border-radius:4px;padding:.3rem .6rem;margin:.4rem 0}
details.failed{border-color:#d33;background:#fff8f8}summary{cursor:pointer}
.pill{display:inline-block;border-radius:9px;padding:0 .5rem;font-size:.8rem;background:#eef}
.pill.failure,.pill.failed,.pill.error{background:#fdd}.pill.success,.pill.succeeded{background:#dfd}
table{border-collapse:collapse}td,th{border:1px solid #dde;padding:.15rem .5rem;text-align:left}
pre.diff .add{color:#1a7f37}pre.diff .del{color:#cf222e}
code.brief{font-size:.8rem;color:#333;overflow-wrap:anywhere}
footer{margin-top:2rem;border-top:2px solid #ccd;font-size:.9rem}
"""


def _e(text: Any) -> str:
    return escape(str(text), quote=True)


def _pill(status: str) -> str:
    return f'<span class="pill {_e(status.split()[0]) if status else ""}">{_e(status)}</span>' if status else ""


def _diff(text: str) -> str:
    out = []
    for line in text.split("\n"):
        cls = "add" if line.startswith("+") and not line.startswith("+++") else \
            "del" if line.startswith("-") and not line.startswith("---") else ""
        out.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "\n".join(out)


def _item(item: dict[str, Any]) -> str:
    at = f'<span class="at">{_e(item["at"])}</span>'
    if item["type"] in ("prompt", "message"):
        who = "Prompt" if item["type"] == "prompt" else "Agent"
        return f'<div class="item {item["type"]}"><span class="who">{who}</span> {at}<pre>{_e(item["text"])}</pre></div>'
    if item["type"] == "event":
        body = f"<pre>{_e(item['text'])}</pre>" if item["text"] else ""
        return f'<details class="item event"><summary>{_e(item["kind"])} {at}</summary>{body}</details>'
    failed = item["status"] not in ("", "success", "succeeded", "ok")
    bits = [f'<span class="who">{_e(item["name"])}</span>', _pill(item["status"])]
    if item["brief"]:
        bits.append(f'<code class="brief">{_e(item["brief"])}</code>')
    if item["outcome_class"]:
        bits.append(_e(item["outcome_class"]))
    if item["exit_code"]:
        bits.append(f"exit {_e(item['exit_code'])}")
    if item["duration_ms"]:
        bits.append(f"{_e(item['duration_ms'])} ms")
    if item["attempt"]:
        bits.append(f"· {_e(item['attempt'])}")
    parts = [f'<details class="item tool{" failed" if failed else ""}"{" open" if failed else ""}>'
             f'<summary>{" ".join(bits)} {at}</summary>']
    if item["input"]:
        parts.append(f"<h4>input</h4><pre>{_e(item['input'])}</pre>")
    for d in item["diffs"]:
        parts.append(f"<h4>diff of {_e(d['path'])}</h4><pre class=\"diff\">{_diff(d['diff'])}</pre>")
    if item["output"]:
        parts.append(f"<h4>{'error' if failed else 'output'}</h4><pre>{_e(item['output'])}</pre>")
    parts.append("</details>")
    return "".join(parts)


def _turn(turn: dict[str, Any]) -> str:
    parts = [f"<section class=\"turn\"><h2>{_e(turn['title'])} {_pill(turn['status'])}</h2>"]
    if turn["attempts"]:
        parts.append("<ol class=\"attempts\">")
        for a in turn["attempts"]:
            extra = " ".join(_e(x) for x in (a["failure_class"], a["note"]) if x)
            parts.append(f"<li>{_e(a['label'])} {_pill(a['outcome'])} {extra} "
                         f"<span class=\"at\">{a['tool_calls']} tool calls</span></li>")
        parts.append("</ol>")
    parts.extend(_item(i) for i in turn["items"])
    parts.append("</section>")
    return "\n".join(parts)


def page(view: dict[str, Any], counts: dict[str, int]) -> tuple[str, str]:
    """(the page up to and including the proof block's opening, the rest after the block)."""
    meta = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in view["meta"])
    removed = "".join(f"<tr><td>{_e(rule)}</td><td>{n}</td></tr>" for rule, n in sorted(counts.items())) or \
        '<tr><td colspan="2">nothing</td></tr>'
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            f'<meta name="referrer" content="no-referrer"><meta name="viewport" content="width=device-width">'
            f"<title>{_e(view['title'])} — agentlog</title><style>{_CSS}</style></head>\n<body>\n"
            f"<header><h1>{_e(view['title'])}</h1><dl class=\"meta\">{meta}</dl>"
            '<p><button type="button" data-fold="open" hidden>expand all</button> '
            '<button type="button" data-fold="close" hidden>collapse all</button></p></header>\n<main>\n')
    body = "\n".join(_turn(t) for t in view["turns"])
    foot = ("\n</main>\n<footer><h2>What was removed</h2><p>Sanitised by agentlog's export profile "
            "(secrets, home directories, user and host names; see docs/share.md). Count by rule:</p>"
            f"<table><thead><tr><th>rule</th><th>count</th></tr></thead><tbody>{removed}</tbody></table>"
            "<h2>Check it</h2><p>This file carries a proof: run <code>agentlog verify-proof FILE</code>. It checks "
            "that the shown frames are in the recorder's signed log, and that nothing in this file was edited "
            "after it was made.</p></footer>\n"
            f"<script>{_SCRIPT}</script>\n"
            f'<script type="application/json" id="{MARK}">')
    return head + body + foot, "</script>\n</body></html>\n"


__all__ = ["page"]
