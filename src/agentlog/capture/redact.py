"""Secret redaction, applied to content and raw payloads before anything is written.

Runs on the hook path: standard library only and no ``re``. Matching works
on the UTF-8 bytes of the text (lone surrogates pass through), with
``bytes.find`` and 256-entry ``bytes.translate`` tables; every match starts
and ends next to an ASCII byte, so the output always decodes back.

A match is replaced by ``[REDACTED:<rule>]``. Rules:

======================== ===================================================
rule                     what
======================== ===================================================
``aws_access_key``       ``AKIA``/``ASIA`` + ≥16 ``[A-Z0-9]``
``github_token``         ``ghp_ gho_ ghu_ ghs_ ghr_`` + ≥36 ``[A-Za-z0-9]``;
                         ``github_pat_`` + ≥22 ``[A-Za-z0-9_]``
``slack_token``          ``xoxb- xoxp- xoxa- xoxr- xoxs-`` + ≥10 ``[A-Za-z0-9-]``
``google_api_key``       ``AIza`` + ≥35 ``[A-Za-z0-9_-]``
``stripe_key``           ``sk_live_ sk_test_ rk_live_ rk_test_`` + ≥20 ``[A-Za-z0-9]``
                         (publishable ``pk_`` keys are not secret)
``anthropic_key``        ``sk-ant-`` + ≥20 ``[A-Za-z0-9_-]``
``openai_key``           ``sk-proj- sk-svcacct- sk-admin-`` + ≥20 ``[A-Za-z0-9_-]``;
                         legacy ``sk-`` + ≥48 ``[A-Za-z0-9]``
``npm_token``            ``npm_`` + ≥36 ``[A-Za-z0-9]``
``supabase_token``       ``sbp_`` + ≥20 ``[A-Za-z0-9]``
``vercel_token``         ``vercel_`` + ≥20 ``[A-Za-z0-9]``
``gitlab_token``         ``glpat-`` + ≥20 ``[A-Za-z0-9_-]``
``huggingface_token``    ``hf_`` + ≥30 ``[A-Za-z0-9]``
``sendgrid_key``         ``SG.`` + ≥16 ``[A-Za-z0-9_-]`` + ``.`` + ≥16 of the same
``jwt``                  three ``.``-separated base64url segments of ≥10
                         characters, the first two starting ``eyJ``
``private_key``          ``-----BEGIN <label>PRIVATE KEY[ BLOCK]-----`` through
                         the matching ``-----END`` line, or to the end of the
                         text when there is none
``password_assignment``  the value of a key ending in ``password``, ``passwd``
                         or ``passphrase``
``secret_assignment``    the value of a key ending in ``secret``, ``token``,
                         ``api_key``/``apikey``/``api-key``, ``access_key``,
                         ``private_key``, ``secret_key``, ``encryption_key``,
                         ``signing_key``, ``master_key`` (``_``/``-``/no
                         separator alike)
``authorization_header`` the credential of ``Authorization: <scheme> <cred>``
                         (or ``Authorization: <cred>``), and the value of
                         ``X-Api-Key``, ``Api-Key``, ``X-Auth-Token``,
                         ``X-Access-Token``
``url_credentials``      the password in ``scheme://user:PASSWORD@host``
======================== ===================================================

Provider tokens must start a word (the byte before is not ``[A-Za-z0-9_]``)
and take every following character of their class. A token that starts
right where another match ends also counts (so that redacting twice changes
nothing).

Assignments: keys are case-insensitive runs of ``[A-Za-z0-9_.-]`` (so
``DB_PASSWORD``, ``GITHUB_TOKEN``, ``spring.datasource.password``) whose end
is the keyword; the key may be quoted (``"password": "x"``, also JSON
escaped inside a string, ``\\"password\\": \\"x\\"``), then ``=``, ``:``,
``:=``, ``=>`` or ``==`` with optional spaces, or, for ``--flags``, a space
(``--password hunter2``). ``export FOO_TOKEN=...`` is just such a key. Only
the value is replaced: a quoted (``"``/``'``) value up to its closing quote
on the same line, an unquoted one up to whitespace or one of
``"'`,;&<>|\\)}]`` (so a backquoted value, a Markdown code span or shell
command substitution, is not a value). Values
left alone as obviously not secret: shorter than 4 characters, only ``*``,
``$VAR``/``${VAR}``/``$(...)``, ``<placeholder>``, ``{placeholder}``,
``{{ template }}``, ``%(name)s``, ``[REDACTED:...]``, ``null``/``none``/
``true``/``false``/``nil``/``undefined`` type names (``str``, ``string``, ``Optional``...) and a few code words
(``await``, ``new``, ``self``...); unquoted values that look like code
(contain ``(`` or ``[``, or mention the keyword, ignoring ``_``/``-``:
``password=args.password``, ``apiKey = process.env.API_KEY``), and
all-digit unquoted values of token/key keys (``max_token=4096``). Short
flags such as ``-p`` and ``pwd=`` are deliberately not rules (too noisy).

Speed: a C-level ``find`` costs about 1 ns per byte on the reference
machine, so checking 25 prefixes one by one would cost ~20 ms per MB.
Instead each family of rules is found from one *anchor* byte that every
member contains and that is rare in most text (``_`` for ``ghp_``/``npm_``/
..., ``-`` for ``xoxb-``/``sk-``/PEM, ``K`` for ``AKIA``, ``S`` for ``ASIA``/
``SG.``, ``z`` for ``AIza``, ``J`` for ``eyJ``, ``@`` for URLs, and ``=``,
``:``, ``--`` for assignments): ``find`` of a single byte is ``memchr``,
~0.02 ms per MB. When an anchor turns out to be common in the text at hand
(``_`` in source code, ``=`` in config files), that family switches to one
``find`` per prefix (assignments: one lower-cased copy and five keyword
scans), whichever is cheaper; both paths give the same matches.

Measured (``time.perf_counter``, best of 7, CPython 3.11, the slow CI box):

=============================================  =========  ==================
1 MB (``str``) of ...                          no secret  with 5 secrets
=============================================  =========  ==================
text without any anchor byte                   0.2 ms     0.7 ms
prose (random lower-case words)                1.1 ms     1.6 ms
random ``[A-Za-z0-9 ]``                        2.7 ms     5.3 ms
non-ASCII prose (UTF-8 ~1.6 MB)                9 ms       12 ms
JSON log lines                                 15 ms      15 ms
Python source (stdlib)                         19 ms      19 ms
Markdown docs (our reference notes)            21 ms      22 ms
=============================================  =========  ==================

Smaller inputs: a 40-character shell command ~6 µs, 400 bytes of source
~30 µs, 4 KB ~0.1 ms, 40 KB ~1 ms.

The 5 ms-per-MB goal holds for prose-like and trigger-free text, not for
dense technical text: there every anchor is common and the cost is the
~18 single-needle passes (about 1 ms per MB each on this machine). For
comparison, one ``re`` alternation of just the token prefixes takes ~65 ms
per MB of the same Python source.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, List, Tuple

    _Spans = List[Tuple[int, int, int, str]]
    _Handler = Callable[[bytes, int, "_Spans"], None]
    _Hit = Callable[[bytes, int, "_Spans"], int]
    _Needles = Tuple[Tuple[bytes, _Handler, int], ...]


_ALL = bytes(range(256))


def _table(allowed: bytes) -> bytes:
    """256-byte ``translate`` table: 1 for bytes in ``allowed``, 0 for the rest."""
    # Map every allowed byte to allowed[0], then that one value (and only it) to 1.
    v = allowed[0]
    marked = _ALL.translate(bytes.maketrans(allowed, bytes((v,)) * len(allowed)))
    return marked.translate(bytes(v) + b"\x01" + bytes(255 - v))


def _table_except(excluded: bytes) -> bytes:
    """0 for bytes in ``excluded``, 1 for the rest."""
    return _table(excluded).translate(bytes.maketrans(b"\x00\x01", b"\x01\x00"))


_UPPER = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = b"abcdefghijklmnopqrstuvwxyz"
_DIGIT = b"0123456789"
_ALNUM = _UPPER + _LOWER + _DIGIT

_T_UPPER_DIGIT = _table(_UPPER + _DIGIT)
_T_ALNUM = _table(_ALNUM)
_T_ALNUM_US = _table(_ALNUM + b"_")
_T_ALNUM_DASH = _table(_ALNUM + b"-")
_T_B64URL = _table(_ALNUM + b"-_")
_T_ALPHA = _table(_UPPER + _LOWER)
_T_KEY = _table(_ALNUM + b"_.-")
_T_SCHEME = _table(_ALNUM + b"+.-")
_T_VALUE = _table_except(b" \t\n\r\x0b\x0c\"'`,;&<>|\\)}]")
_T_AUTHORITY = _table_except(b" \t\n\r\x0b\x0c/?#\"'`<>\\")
_WORD = _T_ALNUM_US

_QUOTES = b"\"'\\`"
_KEY_LAST = _table(b"detnyDETNY")  # last letters of password/passphrase/secret/token/key/authorization
_BLANKS = b" \t"

# Priority when overlapping matches merge into one replacement (lower wins).
_P_TOKEN, _P_HEADER, _P_ASSIGN = 0, 1, 2

# prefix -> (rule, tail table, minimum tail length); "" table marks a special shape.
_TOKENS: dict[bytes, tuple[str, bytes, int]] = {
    b"AKIA": ("aws_access_key", _T_UPPER_DIGIT, 16),
    b"ASIA": ("aws_access_key", _T_UPPER_DIGIT, 16),
    b"ghp_": ("github_token", _T_ALNUM, 36),
    b"gho_": ("github_token", _T_ALNUM, 36),
    b"ghu_": ("github_token", _T_ALNUM, 36),
    b"ghs_": ("github_token", _T_ALNUM, 36),
    b"ghr_": ("github_token", _T_ALNUM, 36),
    b"github_pat_": ("github_token", _T_ALNUM_US, 22),
    b"xoxb-": ("slack_token", _T_ALNUM_DASH, 10),
    b"xoxp-": ("slack_token", _T_ALNUM_DASH, 10),
    b"xoxa-": ("slack_token", _T_ALNUM_DASH, 10),
    b"xoxr-": ("slack_token", _T_ALNUM_DASH, 10),
    b"xoxs-": ("slack_token", _T_ALNUM_DASH, 10),
    b"AIza": ("google_api_key", _T_B64URL, 35),
    b"sk_live_": ("stripe_key", _T_ALNUM, 20),
    b"sk_test_": ("stripe_key", _T_ALNUM, 20),
    b"rk_live_": ("stripe_key", _T_ALNUM, 20),
    b"rk_test_": ("stripe_key", _T_ALNUM, 20),
    b"sk-ant-": ("anthropic_key", _T_B64URL, 20),
    b"sk-proj-": ("openai_key", _T_B64URL, 20),
    b"sk-svcacct-": ("openai_key", _T_B64URL, 20),
    b"sk-admin-": ("openai_key", _T_B64URL, 20),
    b"sk-": ("openai_key", _T_ALNUM, 48),
    b"npm_": ("npm_token", _T_ALNUM, 36),
    b"sbp_": ("supabase_token", _T_ALNUM, 20),
    b"vercel_": ("vercel_token", _T_ALNUM, 20),
    b"glpat-": ("gitlab_token", _T_B64URL, 20),
    b"hf_": ("huggingface_token", _T_ALNUM, 30),
    b"SG.": ("sendgrid_key", b"", 16),
    b"eyJ": ("jwt", b"", 10),
}
# First two bytes -> prefixes starting with them, longest first.
_BY_HEAD: dict[bytes, list[bytes]] = {}
for _p in sorted(_TOKENS, key=len, reverse=True):
    _BY_HEAD.setdefault(_p[:2], []).append(_p)

RULES = tuple(
    dict.fromkeys(
        [r for r, _, _ in _TOKENS.values()]
        + ["private_key", "password_assignment", "secret_assignment", "authorization_header", "url_credentials"]
    )
)
"""Every rule name this module can emit."""

_PASSWORD_KEYS = (b"password", b"passwd", b"passphrase")
_KEY_SUFFIXES = tuple(
    stem + sep + b"key"
    for stem in (b"api", b"access", b"private", b"secret", b"encryption", b"signing", b"master")
    for sep in (b"_", b"-", b"")
)
_SECRET_KEYS = (b"secret", b"token") + _KEY_SUFFIXES
_HEADER_KEYS = frozenset((b"x-api-key", b"api-key", b"x-auth-token", b"x-access-token"))
_NOT_SECRET = frozenset(
    b"null none true false nil undefined string str bytes number boolean bool int any object "
    b"secretstr optional required redacted hidden masked await new yield lambda function async this self".split()
)
_MARK = b"[REDACTED:"


# --------------------------------------------------------------------------
# Small scanning helpers


def _run_end(b: bytes, i: int, table: bytes) -> int:
    """Index of the first byte at or after ``i`` that ``table`` maps to 0 (or ``len(b)``)."""
    n = len(b)
    step = 64
    while i < n:
        k = b[i : i + step].translate(table).find(0)
        if k >= 0:
            return i + k
        i += step
        step *= 4
    return n


def _token_end(b: bytes, i: int) -> tuple[int, str] | None:
    """The provider token starting exactly at ``i`` (no word-boundary check)."""
    cands = _BY_HEAD.get(b[i : i + 2])
    if cands is None:
        return None
    for prefix in cands:
        if not b.startswith(prefix, i):
            continue
        rule, table, minimum = _TOKENS[prefix]
        t = i + len(prefix)
        if table:
            e = _run_end(b, t, table)
            if e - t >= minimum:
                return e, rule
        elif rule == "jwt":
            e1 = _run_end(b, i, _T_B64URL)
            if e1 - i < 10 or b[e1 : e1 + 1] != b"." or not b.startswith(b"eyJ", e1 + 1):
                continue
            e2 = _run_end(b, e1 + 1, _T_B64URL)
            if e2 - e1 - 1 < 10 or b[e2 : e2 + 1] != b".":
                continue
            e3 = _run_end(b, e2 + 1, _T_B64URL)
            if e3 - e2 - 1 >= 10:
                return e3, rule
        else:  # SendGrid: SG.<id>.<secret>
            e1 = _run_end(b, t, _T_B64URL)
            if e1 - t < 16 or b[e1 : e1 + 1] != b".":
                continue
            e2 = _run_end(b, e1 + 1, _T_B64URL)
            if e2 - e1 - 1 >= 16:
                return e2, rule
    return None


def _token(b: bytes, i: int, spans: _Spans) -> None:
    if i < 0 or (i > 0 and _WORD[b[i - 1]]):
        return
    got = _token_end(b, i)
    if got is not None:
        spans.append((i, got[0], _P_TOKEN, got[1]))


def _pem(b: bytes, j: int, spans: _Spans) -> None:
    """``-----BEGIN ... PRIVATE KEY-----`` at ``j``."""
    start = j + 11
    close = b.find(b"-----", start, start + 80)
    if close < 0:
        return
    label = b[start:close]
    if b"\n" in label or not (label.endswith(b"PRIVATE KEY") or label.endswith(b"PRIVATE KEY BLOCK")):
        return
    marker = b"-----END " + label + b"-----"
    e = b.find(marker, close + 5)
    spans.append((j, len(b) if e < 0 else e + len(marker), _P_TOKEN, "private_key"))


def _placeholder(v: bytes) -> bool:
    """Values that are obviously not a secret, whatever the context."""
    if not v or not v.strip(b"*") or v[:1] == b"$" or v.startswith(_MARK):
        return True
    first, last = v[:1], v[-1:]
    if (first == b"<" and last == b">") or (first == b"{" and last == b"}"):
        return True
    return v.startswith((b"{{", b"%("))


_URL_SPAN = 512
"""Farthest an ``@`` may be from its ``://``."""


def _url_at(b: bytes, j: int, spans: _Spans) -> None:
    """``scheme://user:PASSWORD@`` whose ``@`` is at ``j``."""
    k = b.rfind(b"://", max(0, j - _URL_SPAN), j)
    if k < 0:
        return
    auth = b[k + 3 : j]
    if len(auth.translate(None, b" \t\n\r\x0b\x0c/?#\"'`<>\\")) != len(auth):
        return
    lo = max(0, k - 32)
    scheme = b[lo:k]
    z = scheme.translate(_T_SCHEME).rfind(0)
    scheme = scheme[z + 1 :]
    if not scheme or not _T_ALPHA[scheme[0]]:
        return
    at = 0
    while True:  # the first ':' outside an earlier [REDACTED:...] marker
        colon = auth.find(b":", at)
        mark = auth.find(_MARK, at)
        if colon < 0:
            return
        if 0 <= mark < colon:
            close = auth.find(b"]", mark)
            if close < 0:
                return
            at = close + 1
            continue
        break
    password = auth[colon + 1 :]
    if _placeholder(password):
        return
    spans.append((k + 4 + colon, j, _P_HEADER, "url_credentials"))


def _url_scheme(b: bytes, k: int, spans: _Spans) -> None:
    """Every ``@`` of the authority after the ``://`` at ``k`` (same result as anchoring on ``@``)."""
    end = min(_run_end(b, k + 3, _T_AUTHORITY), k + _URL_SPAN + 1)
    j = b.find(b"@", k + 3, end)
    while j >= 0:
        _url_at(b, j, spans)
        j = b.find(b"@", j + 1, end)


# --------------------------------------------------------------------------
# Assignments and headers


def _close_quote(b: bytes, i: int, quote: bytes, stop: int) -> int:
    """Index of the closing ``quote`` (not backslash-escaped) in ``b[i:stop]``, else ``stop``."""
    while True:
        e = b.find(quote, i, stop)
        if e < 0:
            return stop
        back = e
        while back > i and b[back - 1] == 92:  # backslash
            back -= 1
        if (e - back) % 2 == 0:
            return e
        i = e + 1


def _value_span(b: bytes, q: int) -> tuple[int, int, bool]:
    """(start, end, quoted) of the value starting at ``q``."""
    line_end = b.find(b"\n", q)
    if line_end < 0:
        line_end = len(b)
    c = b[q : q + 1]
    if c == b"\\" and b[q + 1 : q + 2] in (b'"', b"'"):
        esc = b[q : q + 2]
        e = b.find(esc, q + 2, line_end)
        return q + 2, line_end if e < 0 else e, True
    if c and c in b"\"'":  # a backquote is a code span or $(...), not a quoted literal
        return q + 1, _close_quote(b, q + 1, c, line_end), True
    return q, _run_end(b, q, _T_VALUE), False


def _plausible(v: bytes, quoted: bool, keyword: bytes, digits_ok: bool) -> bool:
    """Whether an assignment value may be a secret (see the module docstring)."""
    v = v.strip()
    if len(v) < 4 or _placeholder(v):
        return False
    low = v.lower()
    if low in _NOT_SECRET:
        return False
    if not quoted:
        if b"(" in v or b"[" in v:
            return False
        bare = low.replace(b"_", b"").replace(b"-", b"")
        if keyword.replace(b"_", b"").replace(b"-", b"") in bare:
            return False
        if not digits_ok and low.isdigit():
            return False
    return True


def _header_value(b: bytes, q: int, spans: _Spans) -> None:
    """``[<scheme> ]<credential>`` of an Authorization header whose value starts at ``q``."""
    vs, ve, quoted = _value_span(b, q)
    w = _run_end(b, vs, _T_ALPHA)
    if 0 < w - vs <= 20 and b[w : w + 1] in (b" ", b"\t") and (w < ve or not quoted):
        rest = b[w : ve if quoted else w + 72]
        vs = w + len(rest) - len(rest.lstrip(_BLANKS))
        if not quoted:
            ve = _run_end(b, vs, _T_VALUE)
    if ve > vs and _plausible(b[vs:ve], True, b"", True):
        spans.append((vs, ve, _P_HEADER, "authorization_header"))


def _key_end(b: bytes, ke: int, spans: _Spans) -> None:
    """An assignment whose key ends at ``ke`` (both scanning paths end here)."""
    if ke < len(b) and _T_KEY[b[ke]]:
        return  # the key goes on: "password_hash", "tokenizer"
    lo = max(0, ke - 65)
    window = b[lo:ke]
    z = window.translate(_T_KEY).rfind(0)
    key = window[z + 1 :].lower()
    if not key:
        return
    flag = (z >= 0 or lo == 0) and key.startswith(b"--")
    if key.endswith(_PASSWORD_KEYS):
        rule = "password_assignment"
        keyword = next(k for k in _PASSWORD_KEYS if key.endswith(k))
    elif key.endswith(b"authorization"):
        rule, keyword = "authorization_header", b"authorization"
    elif key.endswith(_SECRET_KEYS):
        rule = "authorization_header" if key.lstrip(b"-") in _HEADER_KEYS else "secret_assignment"
        keyword = next(k for k in _SECRET_KEYS if key.endswith(k))
    else:
        return
    rest = b[ke : ke + 72]
    r1 = rest.lstrip(_QUOTES)
    r2 = r1.lstrip(_BLANKS)
    q = ke + len(rest) - len(r2)
    c = r2[:1]
    if c == b"=":
        q += 2 if r2[1:2] in (b"=", b">") else 1
    elif c == b":":
        if r2[1:2] == b":":
            return
        q += 2 if r2[1:2] == b"=" else 1
    elif flag and len(r1) != len(r2) and c not in (b"", b"\n", b"\r", b"-"):
        pass  # --password value
    else:
        return
    rest = b[q : q + 72]
    q += len(rest) - len(rest.lstrip(_BLANKS))
    if q >= len(b):
        return
    if keyword == b"authorization":
        _header_value(b, q, spans)
        return
    vs, ve, quoted = _value_span(b, q)
    if ve > vs and _plausible(b[vs:ve], quoted, keyword, rule == "password_assignment"):
        spans.append((vs, ve, _P_HEADER if rule == "authorization_header" else _P_ASSIGN, rule))


def _at_separator(b: bytes, j: int, spans: _Spans) -> None:
    """``=`` or ``:`` at ``j``: find the key before it."""
    if j == 0:
        return
    if _KEY_LAST[b[j - 1]]:
        _key_end(b, j, spans)
        return
    lo = max(0, j - 72)
    seg = b[lo:j].rstrip(_BLANKS).rstrip(_QUOTES)
    if seg and _KEY_LAST[seg[-1]]:
        _key_end(b, lo + len(seg), spans)


def _at_dash(b: bytes, j: int, spans: _Spans) -> None:
    """``--flag`` starting at ``j``."""
    if b[j + 1 : j + 2] == b"-" and (j == 0 or not _T_KEY[b[j - 1]]):
        _key_end(b, _run_end(b, j + 2, _T_KEY), spans)


def _keywords_by_scan(b: bytes, spans: _Spans) -> None:
    """Assignments found from the keywords in a lower-cased copy (dense-separator path)."""
    low = b.lower()
    for needle in (b"pass", b"secret", b"token", b"key", b"authorization"):
        k = low.find(needle)
        while k >= 0:
            if needle == b"pass":
                for word in _PASSWORD_KEYS:
                    if low.startswith(word, k):
                        _key_end(b, k + len(word), spans)
            else:
                _key_end(b, k + len(needle), spans)
            k = low.find(needle, k + 1)


# --------------------------------------------------------------------------
# Anchored families


def _hit_underscore(b: bytes, j: int, spans: _Spans) -> int:
    if j >= 3 and b[j - 3 : j] in (b"ghp", b"gho", b"ghu", b"ghs", b"ghr", b"npm", b"sbp"):
        _token(b, j - 3, spans)
    elif j >= 2 and b[j - 2 : j] == b"hf":
        _token(b, j - 2, spans)
    if j >= 6 and b[j - 6 : j] == b"vercel":
        _token(b, j - 6, spans)
    if j >= 10 and b[j - 10 : j] == b"github_pat":
        _token(b, j - 10, spans)
    if j >= 2 and b[j - 2 : j] in (b"sk", b"rk"):
        _token(b, j - 2, spans)
    return j + 1


def _dash_run_end(b: bytes, j: int) -> int:
    run = b[j : j + 64]
    return j + len(run) - len(run.lstrip(b"-"))


def _hit_dash(b: bytes, j: int, spans: _Spans) -> int:
    """First ``-`` of a run of dashes at ``j``; returns where the run ends."""
    if j >= 4 and b[j - 4 : j] in (b"xoxb", b"xoxp", b"xoxa", b"xoxr", b"xoxs"):
        _token(b, j - 4, spans)
    elif j >= 2 and b[j - 2 : j] == b"sk":
        _token(b, j - 2, spans)
    elif j >= 5 and b[j - 5 : j] == b"glpat":
        _token(b, j - 5, spans)
    e = _dash_run_end(b, j)
    if e - j >= 5 and b.startswith(b"BEGIN ", e):
        _pem(b, e - 5, spans)
    return e


def _hit_k(b: bytes, j: int, spans: _Spans) -> int:
    if j >= 1 and b[j - 1 : j + 3] == b"AKIA":
        _token(b, j - 1, spans)
    return j + 1


def _hit_s(b: bytes, j: int, spans: _Spans) -> int:
    if j >= 1 and b[j - 1 : j + 3] == b"ASIA":
        _token(b, j - 1, spans)
    elif b.startswith(b"SG.", j):
        _token(b, j, spans)
    return j + 1


def _hit_z(b: bytes, j: int, spans: _Spans) -> int:
    if j >= 2 and b[j - 2 : j + 2] == b"AIza":
        _token(b, j - 2, spans)
    return j + 1


def _hit_j(b: bytes, j: int, spans: _Spans) -> int:
    if j >= 2 and b[j - 2 : j + 1] == b"eyJ":
        _token(b, j - 2, spans)
    return j + 1


def _hit_at(b: bytes, j: int, spans: _Spans) -> int:
    _url_at(b, j, spans)
    return j + 1


def _needle_token(back: int) -> _Handler:
    def handler(b: bytes, k: int, spans: _Spans) -> None:
        _token(b, k - back, spans)

    return handler


_TOKEN_AT = _needle_token(0)
_NO_GATE = -1

# (anchor byte, check at each anchor, fallback (needle, handler, byte the match needs) scans,
# fallback cost in passes, how far before its anchor a match can start)
_FAMILIES: tuple[tuple[int, _Hit, _Needles, int, int], ...] = (
    (
        ord("_"),
        _hit_underscore,
        (
            (b"gh", _TOKEN_AT, _NO_GATE),
            (b"github_pat_", _TOKEN_AT, _NO_GATE),
            (b"npm_", _TOKEN_AT, _NO_GATE),
            (b"sbp_", _TOKEN_AT, _NO_GATE),
            (b"vercel_", _TOKEN_AT, _NO_GATE),
            (b"hf_", _TOKEN_AT, _NO_GATE),
            (b"k_", _needle_token(1), _NO_GATE),
        ),
        8,
        16,
    ),
    (
        ord("-"),
        _hit_dash,
        (
            (b"xox", _TOKEN_AT, _NO_GATE),
            (b"sk-", _TOKEN_AT, _NO_GATE),
            (b"glpat-", _TOKEN_AT, _NO_GATE),
            (b"-----BEGIN ", _pem, _NO_GATE),
        ),
        4,
        16,
    ),
    (ord("K"), _hit_k, ((b"AKIA", _TOKEN_AT, _NO_GATE),), 1, 16),
    (ord("S"), _hit_s, ((b"ASIA", _TOKEN_AT, _NO_GATE), (b"SG.", _TOKEN_AT, ord("."))), 2, 16),
    (ord("z"), _hit_z, ((b"AIza", _TOKEN_AT, _NO_GATE),), 1, 16),
    (ord("J"), _hit_j, ((b"eyJ", _TOKEN_AT, ord(".")),), 1, 16),
    (ord("@"), _hit_at, ((b"://", _url_scheme, _NO_GATE),), 1, _URL_SPAN + 8),
)

_HIT_BYTES = 1200
"""About how many bytes one ``find`` pass covers in the time one anchor hit costs."""
_SLACK = 8
_SAMPLE = 16384


def _estimate(b: bytes, anchor: int) -> int:
    """Count of ``anchor`` in ``b``: exact up to 64 KiB, else scaled from two 16 KiB samples."""
    n = len(b)
    if n <= 4 * _SAMPLE:
        return b.count(anchor)
    mid = n // 2
    return (b.count(anchor, 0, _SAMPLE) + b.count(anchor, mid, mid + _SAMPLE)) * n // (2 * _SAMPLE)


def _scan_needles(b: bytes, start: int, needles: _Needles, spans: _Spans) -> None:
    for needle, handler, gate in needles:
        if gate != _NO_GATE and b.find(gate, start) < 0:
            continue
        k = b.find(needle, start)
        while k >= 0:
            handler(b, k, spans)
            k = b.find(needle, k + 1)


def _scan_family(
    b: bytes,
    anchor: int,
    hit: _Hit,
    needles: _Needles,
    weight: int,
    lookback: int,
    spans: _Spans,
) -> None:
    """Visit every ``anchor`` byte, or run the fallback scans where anchors are common."""
    j = b.find(anchor)
    if j < 0:
        return
    n = len(b)
    if n >= 1024 and _estimate(b, anchor) > _SLACK + n * weight // _HIT_BYTES:
        _scan_needles(b, 0, needles, spans)
        return
    hits = 0
    while j >= 0:
        hits += 1
        if hits > 4 * _SLACK + j * weight // _HIT_BYTES:  # denser here than estimated: switch
            _scan_needles(b, max(0, j - lookback), needles, spans)
            return
        j = b.find(anchor, hit(b, j, spans))


def _scan_assignments(b: bytes, spans: _Spans) -> None:
    n = len(b)
    limit = _SLACK + n * 3 // _HIT_BYTES
    if n >= 1024 and _estimate(b, 61) + _estimate(b, 58) > limit:  # = :
        _keywords_by_scan(b, spans)
        return
    hits = 0
    for anchor in (61, 58, 45):  # = : -
        j = b.find(anchor)
        while j >= 0:
            hits += 1
            if hits > 4 * _SLACK + n * 3 // _HIT_BYTES:
                _keywords_by_scan(b, spans)
                return
            if anchor == 45:
                _at_dash(b, j, spans)
                j = b.find(anchor, _dash_run_end(b, j))
            else:
                _at_separator(b, j, spans)
                j = b.find(anchor, j + 1)


# --------------------------------------------------------------------------
# Driver


def _merge(b: bytes, spans: _Spans) -> _Spans:
    """Sort and merge overlapping spans (the most specific rule names the union).

    A provider token starting right where a span ends is added too: once
    the span is replaced, the token starts a word.
    """
    while True:
        spans.sort()
        out: _Spans = []
        for s, e, p, rule in spans:
            if out and s < out[-1][1]:
                ps, pe, pp, prule = out[-1]
                out[-1] = (ps, max(pe, e), min(pp, p), prule if pp <= p else rule)
            else:
                out.append((s, e, p, rule))
        extra: _Spans = []
        for idx, (_, e, _, _) in enumerate(out):
            if idx + 1 < len(out) and out[idx + 1][0] == e:
                continue  # replaced anyway
            if e < len(b) and _WORD[b[e]]:
                got = _token_end(b, e)
                if got is not None:
                    extra.append((e, got[0], _P_TOKEN, got[1]))
        if not extra:
            return out
        spans = out + extra


_ANCHOR_BYTES = bytes(f[0] for f in _FAMILIES) + b"=:-"
_T_ANCHOR = _table(_ANCHOR_BYTES)

_SHORT_FAMILIES = tuple((*f, tuple(needle for needle, _, _ in f[2])) for f in _FAMILIES)
"""Each family with its fallback needles: every span the family finds (by either scan)
contains one of them, so a text holding none of them gets nothing from the family."""
_KEYWORDS = (b"key", b"token", b"secret", b"pass", b"authorization")
"""Every key an assignment or header rule accepts ends in one of these (after ``lower()``):
``password``/``passwd``/``passphrase``, ``secret``, ``token``, ``…key``, ``authorization``."""


def _holds_any(b: bytes, literals: tuple[bytes, ...]) -> bool:
    for literal in literals:
        if b.find(literal) >= 0:  # find: cheaper than ``in`` for a short bytes needle
            return True
    return False


def _detect(b: bytes) -> _Spans:
    spans: _Spans = []
    if len(b) <= 4096:
        if 1 not in b.translate(_T_ANCHOR):  # no anchor byte at all: nothing can match
            return spans
        # A few C-level checks for the literals every match contains are cheaper than
        # visiting each anchor of a short text: a family, or the assignments, whose literals
        # are all absent cannot add a span, so skipping it leaves the spans as they are.
        for anchor, hit, needles, weight, lookback, literals in _SHORT_FAMILIES:
            if anchor in b and _holds_any(b, literals):
                _scan_family(b, anchor, hit, needles, weight, lookback, spans)
        if (61 in b or 58 in b or 45 in b) and _holds_any(b.lower(), _KEYWORDS):  # = : -
            _scan_assignments(b, spans)
    else:
        for anchor, hit, needles, weight, lookback in _FAMILIES:
            _scan_family(b, anchor, hit, needles, weight, lookback, spans)
        _scan_assignments(b, spans)
    return _merge(b, spans) if spans else spans


def redact_text(text: str) -> tuple[str, dict[str, int]]:
    """``(redacted text, {rule: count})``; the same ``text`` object when nothing matched.

    Never raises for any ``str`` (non-ASCII, lone surrogates, any size).
    Idempotent: redacting the result again changes nothing.
    """
    if len(text) < 7:
        return text, {}
    b = text.encode("utf-8", "surrogatepass")
    spans = _detect(b)
    if not spans:
        return text, {}
    counts: dict[str, int] = {}
    parts: list[bytes] = []
    pos = 0
    for s, e, _, rule in spans:
        parts.append(b[pos:s])
        parts.append(_MARK + rule.encode() + b"]")
        counts[rule] = counts.get(rule, 0) + 1
        pos = e
    parts.append(b[pos:])
    out = b"".join(parts)
    try:
        return out.decode("utf-8", "surrogatepass"), counts
    except UnicodeDecodeError:  # pragma: no cover - spans end next to ASCII bytes
        return out.decode("utf-8", "replace"), counts


_MAX_DEPTH = 200
_MIN_SECRET_KEY = 16
"""Keys shorter than this are not looked at: no secret the rules know is that short, and
most keys are short names (checking each would double the cost of a wide object)."""


def _walk(value: object, counts: dict[str, int], depth: int, memo: dict[str, tuple[str, dict[str, int]]] | None = None) -> object:
    if isinstance(value, str):
        if len(value) < 7:
            return value
        if memo is None:
            out, found = redact_text(value)
        else:
            got = memo.get(value)
            if got is None:
                got = memo[value] = redact_text(value)
            out, found = got
            if not found:
                return value  # unchanged: this very object (an equal one may be what the memo holds)
        for rule, n in found.items():
            counts[rule] = counts.get(rule, 0) + n
        return out
    if depth > _MAX_DEPTH:
        return _deep(value, counts)
    if isinstance(value, dict):
        new_dict: dict[object, object] | None = None
        renamed = False
        for k, v in value.items():
            if v.__class__ is not str or len(v) >= 7:  # a short string is left as it is: no call
                r = _walk(v, counts, depth + 1, memo)
                if r is not v:
                    if new_dict is None:
                        new_dict = dict(value)
                    new_dict[k] = r
            if isinstance(k, str) and len(k) >= _MIN_SECRET_KEY and _finds(k, memo):
                renamed = True
        if renamed:  # a secret used as a key: the key is redacted too
            return _rename_keys(new_dict if new_dict is not None else value, counts)
        return value if new_dict is None else new_dict
    if isinstance(value, (list, tuple)):
        new_list: list[object] | None = None
        for i, v in enumerate(value):
            if v.__class__ is str and len(v) < 7:
                continue
            r = _walk(v, counts, depth + 1, memo)
            if r is not v:
                if new_list is None:
                    new_list = list(value)
                new_list[i] = r
        if new_list is None:
            return value
        return tuple(new_list) if isinstance(value, tuple) else new_list
    return value


def _finds(key: str, memo: dict[str, tuple[str, dict[str, int]]] | None) -> bool:
    """Whether the redactor finds anything in a dict key."""
    if memo is None:
        return bool(redact_text(key)[1])
    got = memo.get(key)
    if got is None:
        got = memo[key] = redact_text(key)
    return bool(got[1])


def _rename_keys(value: dict[object, object], counts: dict[str, int]) -> dict[object, object]:
    """``value`` with every string key redacted; two keys that redact alike stay apart (``#2``)."""
    out: dict[object, object] = {}
    for k, v in value.items():
        if isinstance(k, str) and len(k) >= _MIN_SECRET_KEY:
            clean, found = redact_text(k)
            for rule, n in found.items():
                counts[rule] = counts.get(rule, 0) + n
            key: object = clean
            n = 2
            while key in out:
                key = f"{clean}#{n}"
                n += 1
            out[key] = v
        else:
            out[k] = v
    return out


def _deep(value: object, counts: dict[str, int]) -> object:
    """What lies below the depth limit, redacted as its serialised text: kept as it is when
    the text holds nothing, else replaced by the redacted text (or by a placeholder when it
    cannot be serialised)."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    from agentlog.core.fastjson import dumps

    try:
        text = dumps(value)
    except (TypeError, ValueError, RecursionError):
        counts["too_deep"] = counts.get("too_deep", 0) + 1
        return "[REDACTED:nested too deep to check]"
    clean, found = redact_text(text)
    if clean is text:
        return value
    for rule, n in found.items():
        counts[rule] = counts.get(rule, 0) + n
    return clean


def redact_value(value: object, memo: dict[str, tuple[str, dict[str, int]]] | None = None) -> tuple[object, dict[str, int]]:
    """Redact every string inside ``value`` (dict values, list/tuple items, nested).

    Dict keys are redacted too (a secret used as a key). Containers are copied
    only along the paths where something changed; otherwise the same object
    comes back. Below 200 levels of nesting, what remains is redacted as its
    serialised text (replaced by that text when it held a secret).

    ``memo`` (a dict the caller keeps) lets several calls share the work for
    equal strings: the hook redacts ``content`` and ``raw``, which hold the
    same tool input and output (the result is a function of the text alone).
    """
    counts: dict[str, int] = {}
    return _walk(value, counts, 0, memo), counts


def redact_project(project: dict[str, Any]) -> dict[str, Any]:
    """A project object (root, name, remote, branch, head: text read from a repository the
    user may not control) with every text field redacted like any other text."""
    return {k: redact_text(v)[0] if isinstance(v, str) else v for k, v in project.items()}


OUTPUT_ATTRS = ("failure_evidence", "failing_tests", "first_error", "result_summary")
"""``attrs`` that quote a tool's output (capture.failures): redacted with the content."""


def redact_into(attrs: dict[str, Any], *values: object) -> list[object]:
    """Each of ``values`` redacted (``None`` left as it is; one memo shared, since content
    and raw hold the same strings), and what was found counted into ``attrs``
    (``redactions``, ``redacted``) when anything was."""
    counts: dict[str, int] = {}
    memo: dict[str, tuple[str, dict[str, int]]] = {}
    out: list[object] = []
    for key in OUTPUT_ATTRS:  # text taken from a tool's output (failure evidence, test ids)
        text = attrs.get(key)
        if isinstance(text, str):
            clean_text, found = redact_value(text, memo)
            attrs[key] = clean_text
            for rule, n in found.items():
                counts[rule] = counts.get(rule, 0) + n
    for value in values:
        if value is None:
            out.append(value)
            continue
        clean, found = redact_value(value, memo)
        for rule, n in found.items():
            counts[rule] = counts.get(rule, 0) + n
        out.append(clean)
    if counts:
        attrs["redactions"] = sum(counts.values())
        attrs["redacted"] = counts
    return out
