"""The export profile of redaction (docs/share.md, "What is removed"): stricter than capture's.

Capture redacts known secrets before anything is written (``capture/redact.py``). What leaves the
machine in a shared file goes through more:

- ``secret:<rule>``: capture's rules again (a log written by an older version, or imported);
- ``high_entropy``: a run of 32 or more letters, digits, ``+_=-`` with upper case, lower case and
  digits, whose characters carry 4.2 bits or more each (keys the named rules do not know);
- ``email``: an e-mail address;
- ``home_dir``: ``/home/<u>``, ``/Users/<u>``, ``C:\\Users\\<u>``, ``/root`` become ``~``, and ``<u>``
  is remembered as a user name;
- ``user_name``: a user name (this machine's, and every one seen in a home directory) as a word,
  but for names that are common words (``root``, ``runner``, ``user``…: :data:`NOT_NAMES`);
- ``host_name``: this machine's host name (and its first label), and the hosts the events name;
- ``path`` (``--redact-paths``): an absolute or ``~`` path keeps its last component only;
- ``regex N`` (``--redact REGEX``): each match of the N-th pattern.

Then characters that would hide or reorder text (controls, bidi overrides, zero-width ones) are
shown as ``\\u{XXXX}``, and lone surrogates as U+FFFD. Counts by rule are kept for the appendix.
"""

from __future__ import annotations

import getpass
import math
import re
import socket
from collections import Counter
from typing import Final, Iterable

from agentlog.core import UsageError

_HOME: Final = re.compile(r"(?:/home/|/Users/|[A-Za-z]:\\\\?Users\\\\?)([A-Za-z0-9._-]{1,64})|(?<![\w.-])/root(?![\w.-])")
_EMAIL: Final = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}")
_TOKEN: Final = re.compile(r"(?<![A-Za-z0-9+_=-])[A-Za-z0-9+_=-]{32,}(?![A-Za-z0-9+_=-])")
_PATH: Final = re.compile(r"(?<![\w.~/-])~?(?:/[\w.@+-]+)*/([\w.@+-]+)")
_INVISIBLE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
NOT_NAMES: Final = frozenset({"root", "shared", "runner", "user", "users", "home", "admin", "ubuntu", "debian"})
"""Home directory names too common as words to replace everywhere (their home paths still go)."""
MAX_PATTERNS: Final = 32


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _secretish(token: str) -> bool:
    return (any(c.isdigit() for c in token) and any(c.isupper() for c in token) and any(c.islower() for c in token)
            and _entropy(token) >= 4.2)


def _word(names: Iterable[str]) -> re.Pattern[str] | None:
    alts = sorted({n for n in names if n}, key=len, reverse=True)
    if not alts:
        return None
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(a) for a in alts) + r")(?![A-Za-z0-9])", re.IGNORECASE)


def local_names() -> tuple[set[str], set[str]]:
    """(user names, host names) of this machine."""
    users: set[str] = set()
    try:
        users.add(getpass.getuser())
    except (KeyError, OSError):
        pass
    host = socket.gethostname()
    hosts = {host, host.split(".", 1)[0]} if host else set()
    return users, hosts


class Sanitizer:
    """Applies the export profile to text, counting what each rule removed (:attr:`counts`).

    ``users`` and ``hosts``: names to replace besides this machine's (a share first gathers the
    user names in every home path of the shown text, :meth:`learn`, so that a name met before its
    home path is replaced too)."""

    def __init__(self, *, users: Iterable[str] = (), hosts: Iterable[str] = (), redact_paths: bool = False,
                 patterns: Iterable[str] = ()) -> None:
        mine_u, mine_h = local_names()
        self.users = {u for u in (*users, *mine_u) if len(u) >= 3}
        self.hosts = {h for h in (*hosts, *mine_h) if len(h) >= 2 and h.lower() not in ("localhost", "unknown")}
        self.redact_paths = redact_paths
        self.patterns: list[re.Pattern[str]] = []
        for i, p in enumerate(patterns, 1):
            if i > MAX_PATTERNS:
                raise UsageError(f"at most {MAX_PATTERNS} --redact patterns")
            try:
                compiled = re.compile(p)
            except re.error as e:
                raise UsageError(f"--redact {p!r} is not a regular expression: {e}") from None
            if compiled.search("") is not None:
                raise UsageError(f"--redact {p!r} matches the empty string")
            self.patterns.append(compiled)
        self.counts: Counter[str] = Counter()
        self._compile()

    def _compile(self) -> None:
        self._users = _word(n for n in self.users if n.lower() not in NOT_NAMES)
        self._hosts = _word(self.hosts)

    def learn(self, texts: Iterable[str]) -> None:
        """Remember the user name of every home directory in ``texts``."""
        for text in texts:
            for m in _HOME.finditer(text):
                if m.group(1) and len(m.group(1)) >= 3:
                    self.users.add(m.group(1))
        self._compile()

    def _sub(self, pattern: re.Pattern[str], rule: str, text: str, repl: str) -> str:
        out, n = pattern.subn(repl, text)
        if n:
            self.counts[rule] += n
        return out

    def __call__(self, text: str) -> str:
        from agentlog.capture.redact import redact_text

        text = _SURROGATE.sub("\ufffd", text)
        text, found = redact_text(text)
        for rule, n in found.items():
            self.counts[f"secret:{rule}"] += n

        def token(m: re.Match[str]) -> str:
            if not _secretish(m.group(0)):
                return m.group(0)
            self.counts["high_entropy"] += 1
            return "[REDACTED:high_entropy]"

        text = _TOKEN.sub(token, text)
        text = self._sub(_EMAIL, "email", text, "<email>")
        text = self._sub(_HOME, "home_dir", text, "~")
        if self._users is not None:
            text = self._sub(self._users, "user_name", text, "<user>")
        if self._hosts is not None:
            text = self._sub(self._hosts, "host_name", text, "<host>")
        if self.redact_paths:
            text = self._sub(_PATH, "path", text, r"<path>/\1")
        for i, p in enumerate(self.patterns, 1):
            text = self._sub(p, f"regex {i}", text, f"[REDACTED:regex {i}]")
        return _INVISIBLE.sub(lambda m: "\\u{%04X}" % ord(m.group(0)), text)


__all__ = ["MAX_PATTERNS", "NOT_NAMES", "Sanitizer", "local_names"]
