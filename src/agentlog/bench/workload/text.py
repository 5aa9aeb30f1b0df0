"""Synthetic text: word lists written for this benchmark, mixed with seeded numbers and hex.

Nothing here is copied from real traffic or from another project. Every
string the workload emits (commands, outputs, file contents, prompts,
messages) is assembled from the lists below.

How entropy is controlled (so that zstd sees roughly what it sees in real
agent traffic): for each genre a *pool* of lines is built once per seed, and
texts are drawn as random sequences of pool lines. A share of the pool lines
carries *dynamic slots* (numbers, hex ids, durations) that are filled afresh
on every use. Real outputs behave alike: the same compiler messages, test
names and code lines recur, with different numbers. Two knobs, tuned so that
zstd level 3 over the JSONL of the canonical events compresses ~8.7:1 (the
seed document's calibration): the pool size per genre (:data:`POOL_LINES`)
and the share of lines with dynamic slots (:data:`DYNAMIC_SHARE`). Bigger
pools and more slots mean less compressible text.

Words that the capture path reacts to are kept out of the lists on purpose:
failure words (``not found``, ``timeout``, ``interrupted``, …) would change a
failure's class, and secret-like assignments (``…token = "…"``) would be
redacted.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Callable, Union

# ---------------------------------------------------------------------------
# Word lists (written for this benchmark)

NOUNS: tuple[str, ...] = tuple("""
buffer segment writer reader index cursor frame offset length header record chunk stream channel queue
worker handle config options builder parser lexer scanner encoder decoder codec schema table column row
batch page block cache pool arena slot entry bucket shard replica lease epoch clock timer tick signal
event hook payload envelope digest checksum manifest snapshot journal ledger span trace metric gauge
counter sample window range bound limit quota budget retry backoff deadline session turn attempt task
job step stage plan graph node edge route target source sink pipe socket listener server client request
response status report summary detail context scope state store backend driver adapter bridge proxy
gateway registry catalog module crate package feature profile fixture harness bench probe sensor filter
mapper reducer sorter merger splitter joiner walker visitor matcher pattern rule policy guard lock mutex
latch barrier future promise tree leaf root branch commit diff patch hunk line word char byte bit flag
mask mode kind level depth width height size count total delta ratio rate score weight bias margin
padding border layout view panel widget button label field form input output prompt reply message note
comment draft version release tag label owner author user team group member role account device host
port address domain region zone cluster pod container image volume mount disk file folder archive bundle
asset resource handler callback closure iterator generator cursor lens prism vector matrix tensor shape
axis grid cell tile region sprite mesh vertex pixel color shade tone pitch tempo beat track album
invoice order cart price stock item unit batch lot shipment carrier parcel route depot forecast
""".split())

VERBS: tuple[str, ...] = tuple("""
open close read write flush sync seal load store fetch parse encode decode merge split sort scan seek
append insert remove update apply build check verify validate resolve render format emit collect spawn
join wait poll notify retry reset clear drain fill grow shrink rotate compact hash compare match filter
map reduce walk visit trace measure report dispatch route forward accept reject commit rollback replay
restore recover repair prune evict refresh reload start stop pause resume bind attach detach mount
unmount publish subscribe schedule enqueue dequeue borrow release acquire allocate reserve split
normalise sanitize escape quote splice trim pad align wrap unwrap lift lower promote demote tag
""".split())

ADJECTIVES: tuple[str, ...] = tuple("""
new raw dirty clean stale fresh empty full partial pending active idle local remote shared unique sorted
nested inner outer first last next prev max min total current default strict relaxed lazy eager cold
hot small large fast slow safe sparse dense flat deep wide narrow short long early late upper lower
primary spare stable fixed dynamic static global inline cached frozen mutable visible hidden valid
""".split())

TYPES_RS: tuple[str, ...] = tuple("""
u8 u16 u32 u64 usize i32 i64 f64 bool String &str Vec<u8> Option<u64> PathBuf Duration Instant
Arc<Mutex<State>> HashMap<String,u64> BTreeMap<u64,Entry> Box<dyn Error> Result<()> &[u8] Self
""".split())

PROSE: tuple[str, ...] = tuple("""
the a an this that these those we it they you is are was were be been should could would can will
may might must not and or but so then when if because after before also still only just now again
all some every each more less than with without into from to of in on at for by about over under
between through during across along around like make fix add change move keep drop use need want see
look try run test pass fail break work check show tell explain think seems looks happens means
instead rather maybe probably clearly quickly carefully first second third next last here there where
why how what which who whose while until since though although whether either neither both few many
much most least other another same different similar simple small big good better best bad worse
right wrong true false clear obvious likely unlikely already yet soon later today tomorrow code file
function method type value list map call loop branch case path name line number result behaviour
change edit update review plan step idea reason problem issue question answer approach option detail
part piece whole rest end start side top bottom left right inside outside before after around
""".split())

PROGRAMS: tuple[str, ...] = ("cargo", "git", "rg", "ls", "cat", "sed", "head", "tail", "wc", "python3", "make",
                             "jq", "find", "grep", "diff", "mkdir", "cp", "mv", "npm", "uv", "just", "du")

SUBAGENT_TASKS: tuple[str, ...] = (
    "Survey the {n} module", "Review the {n} changes", "Find every caller of {v}_{n}", "Write tests for {n}",
    "Plan the {n} refactor", "Check the {n} benchmarks", "Trace the {n} {n} path", "Audit {n} handling",
)

# Marker characters for dynamic slots inside pool lines.
_INT = "\x01"  # 0..99999
_SMALL = "\x02"  # 1..999
_HEX8 = "\x03"  # 8 hex digits
_SHA = "\x04"  # 40 hex digits
_SECS = "\x05"  # a duration like 12.48
_MARKS = frozenset((_INT, _SMALL, _HEX8, _SHA, _SECS))

Line = Union[str, tuple[str, ...]]

GENRES = ("code_rs", "code_py", "prose", "markdown", "shell", "jsonl", "config")

POOL_LINES: dict[str, int] = {
    "code_rs": 12000,
    "code_py": 3000,
    "prose": 6000,
    "markdown": 5000,
    "shell": 12000,
    "jsonl": 2500,
    "config": 800,
}
"""Lines per genre pool (tuned: see the module docstring)."""

DYNAMIC_SHARE: dict[str, float] = {
    "code_rs": 0.28,
    "code_py": 0.25,
    "prose": 0.12,
    "markdown": 0.2,
    "shell": 0.55,
    "jsonl": 0.9,
    "config": 0.2,
}
"""Share of pool lines with dynamic slots (tuned)."""


class _Maker:
    """Builds one pool line; numbers are fixed now or left as dynamic slots."""

    __slots__ = ("r", "dynamic")

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.dynamic = False

    def w(self, words: tuple[str, ...]) -> str:
        return words[self.r.randrange(len(words))]

    def noun(self) -> str:
        return NOUNS[self.r.randrange(len(NOUNS))]

    def verb(self) -> str:
        return VERBS[self.r.randrange(len(VERBS))]

    def adj(self) -> str:
        return ADJECTIVES[self.r.randrange(len(ADJECTIVES))]

    def camel(self) -> str:
        return self.noun().capitalize() + self.noun().capitalize()

    def ident(self) -> str:
        k = self.r.random()
        if k < 0.4:
            return self.noun()
        if k < 0.8:
            return self.adj() + "_" + self.noun()
        return self.noun() + "_" + self.noun()

    def num(self, lo: int = 0, hi: int = 99999) -> str:
        return _INT if self.dynamic else str(self.r.randint(lo, hi))

    def small(self) -> str:
        return _SMALL if self.dynamic else str(self.r.randint(1, 999))

    def hex8(self) -> str:
        return _HEX8 if self.dynamic else format(self.r.getrandbits(32), "08x")

    def sha(self) -> str:
        return _SHA if self.dynamic else format(self.r.getrandbits(160), "040x")

    def secs(self) -> str:
        return _SECS if self.dynamic else f"{self.r.random() * 40:.2f}"

    def sentence(self, lo: int = 6, hi: int = 18) -> str:
        n = self.r.randint(lo, hi)
        words = [PROSE[self.r.randrange(len(PROSE))] for _ in range(n)]
        # sprinkle domain words so prose talks about the code
        for i in range(0, n, 4):
            if self.r.random() < 0.5:
                words[i] = self.ident() if self.r.random() < 0.3 else self.noun()
        s = " ".join(words)
        return s[:1].upper() + s[1:] + self.w((".", ".", ".", "?", ":", "!"))


def _rs_line(m: _Maker) -> str:
    r = m.r.random
    ind = "    " * m.r.choice((0, 1, 1, 2, 2, 2, 3))
    k = m.r.randrange(17)
    if k == 16:
        return f"{ind}const {m.noun().upper()}_{m.noun().upper()}: u64 = 0x{m.hex8()}{m.hex8()};"
    if k == 0:
        return f"{ind}fn {m.verb()}_{m.noun()}(&mut self, {m.ident()}: {m.w(TYPES_RS)}) -> Result<{m.camel()}> {{"
    if k == 1:
        return f"{ind}let {m.ident()} = self.{m.ident()}.{m.verb()}(&{m.ident()})?;"
    if k == 2:
        return f"{ind}if {m.ident()}.len() > {m.num(1, 4096)} {{"
    if k == 3:
        return f"{ind}return Err(Error::{m.camel()}({m.ident()}));"
    if k == 4:
        return f"{ind}}}" if r() < 0.7 else ""
    if k == 5:
        return f"{ind}/// {m.sentence(5, 14)}"
    if k == 6:
        return f"{ind}self.{m.ident()} += {m.num(1, 512)};"
    if k == 7:
        return m.w(("#[derive(Debug, Clone, PartialEq, Eq)]", "#[inline]", "#[cfg(test)]", "#[test]",
                    "#[derive(Debug, Default)]", "#[must_use]"))
    if k == 8:
        return f"pub struct {m.camel()} {{" if r() < 0.5 else f"impl {m.camel()} {{"
    if k == 9:
        return f"{ind}pub {m.ident()}: {m.w(TYPES_RS)},"
    if k == 10:
        return f"use crate::{m.noun()}::{{{m.camel()}, {m.camel()}}};"
    if k == 11:
        return f"{ind}assert_eq!({m.ident()}.{m.verb()}(), {m.num(0, 9999)});"
    if k == 12:
        return f"{ind}match {m.ident()} {{" if r() < 0.4 else f"{ind}{m.camel()}::{m.camel()} => {m.verb()}_{m.noun()}({m.ident()}),"
    if k == 13:
        return f"{ind}// {m.sentence(4, 12)}"
    if k == 14:
        return f'{ind}let {m.ident()} = format!("{m.noun()}-{{}}-{m.hex8()}", {m.ident()});'
    return f"{ind}for {m.noun()} in {m.ident()}.iter().take({m.num(1, 256)}) {{"


def _py_line(m: _Maker) -> str:
    ind = "    " * m.r.choice((0, 1, 1, 2, 2))
    k = m.r.randrange(12)
    if k == 0:
        return f"{ind}def {m.verb()}_{m.noun()}(self, {m.ident()}: int, {m.ident()}: str) -> dict:"
    if k == 1:
        return f"{ind}{m.ident()} = self.{m.ident()}.{m.verb()}({m.ident()})"
    if k == 2:
        return f"{ind}if len({m.ident()}) > {m.num(1, 4096)}:"
    if k == 3:
        return f"{ind}raise ValueError(\"{m.sentence(3, 8)}\")"
    if k == 4:
        return f"{ind}return {m.ident()}"
    if k == 5:
        return f'{ind}"""{m.sentence(5, 14)}"""'
    if k == 6:
        return f"class {m.camel()}:"
    if k == 7:
        return f"from .{m.noun()} import {m.camel()}, {m.verb()}_{m.noun()}"
    if k == 8:
        return f"{ind}assert {m.ident()}.{m.verb()}() == {m.num(0, 9999)}"
    if k == 9:
        return f"{ind}# {m.sentence(4, 12)}"
    if k == 10:
        return f"{ind}for {m.noun()} in {m.ident()}[:{m.num(1, 256)}]:"
    return ""


def _prose_line(m: _Maker) -> str:
    n = m.r.randint(1, 3)
    return " ".join(m.sentence() for _ in range(n))


def _markdown_line(m: _Maker) -> str:
    k = m.r.randrange(10)
    if k == 0:
        return f"{m.w(('#', '##', '###'))} {m.camel()} {m.noun()}"
    if k in (1, 2, 3):
        return f"- {m.sentence(4, 14)}"
    if k == 4:
        return f"- `{m.verb()}_{m.noun()}` — {m.sentence(3, 10)}"
    if k == 5:
        return ""
    if k == 6:
        return f"| {m.noun()} | {m.num(0, 99999)} | {m.adj()} |"
    if k == 7:
        return f"{m.small()}. {m.sentence(4, 12)}"
    return m.sentence(8, 24)


def _shell_line(m: _Maker) -> str:
    k = m.r.randrange(16)
    if k == 14:
        return f"{m.sha()} refs/heads/{m.noun()}-{m.verb()}"
    if k == 15:
        return f"  {m.w(('sha256', 'blake3', 'etag'))}: {m.sha()}{m.hex8()[:4]}"
    if k == 0:
        return f"   Compiling {m.noun()}-{m.noun()} v0.{m.small()}.{m.num(0, 40)} ({m.noun()})"
    if k == 1:
        return f"test {m.noun()}::{m.noun()}::tests::{m.verb()}_{m.ident()} ... ok"
    if k == 2:
        return f"warning: unused variable: `{m.ident()}`"
    if k == 3:
        return f"  --> crates/{m.noun()}/src/{m.noun()}.rs:{m.small()}:{m.num(1, 80)}"
    if k == 4:
        return f"{m.hex8()[:7]} {m.sentence(3, 9)}"
    if k == 5:
        return (f"-rw-r--r--  1 dev  staff  {m.num(100, 99999)} Jan {m.num(1, 28)} "
                f"{m.num(10, 23)}:{m.num(10, 59)} {m.ident()}.rs")
    if k == 6:
        return f"crates/{m.noun()}/src/{m.noun()}.rs:{m.small()}:    let {m.ident()} = {m.ident()}.{m.verb()}();"
    if k == 7:
        return f"    Finished `test` profile [unoptimized + debuginfo] target(s) in {m.secs()}s"
    if k == 8:
        return (f"test result: ok. {m.small()} passed; 0 failed; {m.num(0, 3)} ignored; 0 measured; "
                f"0 filtered out; finished in {m.secs()}s")
    if k == 9:
        return f"{m.ident()}: {m.num()} {m.w(('ms', 'bytes', 'events', 'frames', 'rows'))}"
    if k == 10:
        return f"     Running unittests src/lib.rs (target/debug/deps/{m.noun()}-{m.hex8()}{m.hex8()})"
    if k == 11:
        return f"{m.w(('M', 'A', '??', 'D'))} crates/{m.noun()}/src/{m.ident()}.rs"
    if k == 12:
        return f"[{m.num(0, 23)}:{m.num(10, 59)}:{m.num(10, 59)}] {m.w(('INFO', 'DEBUG', 'WARN'))} {m.noun()}: {m.sentence(3, 10)}"
    return f"  {m.small()} | {m.ident()}.{m.verb()}({m.ident()}, {m.num(0, 999)});"


def _jsonl_line(m: _Maker) -> str:
    return (f'{{"id":"{m.hex8()}","{m.noun()}":"{m.ident()}","{m.noun()}":{m.num()},'
            f'"at":"2026-01-{m.num(10, 28)}T{m.num(10, 23)}:{m.num(10, 59)}:{m.num(10, 59)}Z","{m.noun()}":{m.w(("true", "false", "null"))}}}')


def _config_line(m: _Maker) -> str:
    k = m.r.randrange(5)
    if k == 0:
        return f"[{m.noun()}.{m.noun()}]"
    if k == 1:
        return f'{m.ident()} = "{m.noun()}-{m.noun()}"'
    if k == 2:
        return f"{m.ident()} = {m.num(0, 9999)}"
    if k == 3:
        return f'{m.noun()} = {{ version = "0.{m.small()}", features = ["{m.noun()}"] }}'
    return ""


_MAKERS: dict[str, Callable[[_Maker], str]] = {
    "code_rs": _rs_line,
    "code_py": _py_line,
    "prose": _prose_line,
    "markdown": _markdown_line,
    "shell": _shell_line,
    "jsonl": _jsonl_line,
    "config": _config_line,
}

EXT_GENRE: dict[str, str] = {
    "rs": "code_rs", "py": "code_py", "txt": "prose", "md": "markdown", "jsonl": "jsonl", "toml": "config",
    "json": "jsonl",
}


def _split(line: str) -> Line:
    """A pool line: plain text, or a tuple of parts where marker characters are slots."""
    if not any(ch in _MARKS for ch in line):
        return line
    parts: list[str] = []
    cur: list[str] = []
    for ch in line:
        if ch in _MARKS:
            if cur:
                parts.append("".join(cur))
                cur = []
            parts.append(ch)
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return tuple(parts)


def fill(rng: random.Random, mark: str) -> str:
    if mark == _INT:
        return str(rng.randrange(100000))
    if mark == _SMALL:
        return str(rng.randrange(1, 1000))
    if mark == _HEX8:
        return format(rng.getrandbits(32), "08x")
    if mark == _SHA:
        return format(rng.getrandbits(160), "040x")
    return f"{rng.random() * 40:.2f}"


class TextSource:
    """Seeded text of requested sizes (see the module docstring)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._pools: dict[str, tuple[list[Line], float]] = {}

    def pool(self, genre: str) -> tuple[list[Line], float]:
        """(lines, mean line length + 1) of a genre, built on first use from a sub-seed."""
        got = self._pools.get(genre)
        if got is not None:
            return got
        rng = random.Random(f"agentlog-bench-text/{self.seed}/{genre}")
        maker = _MAKERS[genre]
        m = _Maker(rng)
        share = DYNAMIC_SHARE[genre]
        lines: list[Line] = []
        total = 0
        for _ in range(POOL_LINES[genre]):
            m.dynamic = rng.random() < share
            s = maker(m)
            total += len(s) + 1
            lines.append(_split(s))
        got = (lines, total / len(lines))
        self._pools[genre] = got
        return got

    def text(self, genre: str, size: int, rng: random.Random) -> str:
        """About ``size`` characters of ``genre`` lines (cut to ``size`` exactly when longer)."""
        if size <= 0:
            return ""
        lines, avg = self.pool(genre)
        out: list[str] = []
        n = 0
        while n < size:
            k = int((size - n) / avg) + 1
            for line in rng.choices(lines, k=k):
                if isinstance(line, str):
                    out.append(line)
                    n += len(line) + 1
                else:
                    s = "".join(fill(rng, p) if p in _MARKS else p for p in line)
                    out.append(s)
                    n += len(s) + 1
        s = "\n".join(out)
        return s[:size] if len(s) > size else s

    def words(self, n: int, rng: random.Random) -> str:
        """``n`` prose words (a short phrase)."""
        return " ".join(PROSE[rng.randrange(len(PROSE))] if rng.random() < 0.6 else NOUNS[rng.randrange(len(NOUNS))]
                        for _ in range(n))

    def prompt(self, size: int, rng: random.Random) -> str:
        """A user prompt of about ``size`` characters: a phrase, or prose with a code block."""
        if size < 200:
            words = max(1, size // 6)
            s = self.words(words, rng)
            return (s[:1].upper() + s[1:])[: max(size, 3)]
        body = self.text("prose", size, rng)
        if size > 1500 and rng.random() < 0.4:
            cut = size * 2 // 3
            body = body[:cut] + "\n```\n" + self.text("shell", size - cut - 8, rng) + "\n```"
        return body

    def message(self, size: int, rng: random.Random) -> str:
        """An assistant message (markdown-ish prose)."""
        if size < 120:
            s = self.words(max(1, size // 6), rng)
            return (s[:1].upper() + s[1:] + ".")[: max(size, 2)]
        return self.text("markdown", size, rng)

    def file_text(self, ext: str, size: int, rng: random.Random) -> str:
        return self.text(EXT_GENRE.get(ext, "prose"), size, rng)

    def command(self, size: int, rng: random.Random, path: Callable[[], str]) -> str:
        """A shell command of about ``size`` characters; long ones carry a heredoc or an inline script."""
        if size < 300:
            return self._one_liner(rng, path)[: max(size, 12)] if size < 40 else self._pipeline(size, rng, path)
        head = self._one_liner(rng, path)
        k = rng.random()
        if k < 0.5:
            target = path()
            body = self.file_text(target.rsplit(".", 1)[-1], size - len(target) - 30, rng)
            return f"cat > {target} <<'EOF'\n{body}\nEOF"
        if k < 0.8:
            body = self.text("code_py", size - 40, rng)
            return f"python3 - <<'PY'\n{body}\nPY"
        body = self.text("prose", size - len(head) - 30, rng)
        return f"{head} && git commit -q -m \"{body[:60]}\" -m \"{body[60:]}\""

    def _pipeline(self, size: int, rng: random.Random, path: Callable[[], str]) -> str:
        parts = [self._one_liner(rng, path)]
        n = len(parts[0])
        while n < size - 20:
            p = self._one_liner(rng, path)
            parts.append(p)
            n += len(p) + 4
        return rng.choice((" && ", " ; ", " && ")).join(parts)[: max(size, 40)]

    def _one_liner(self, rng: random.Random, path: Callable[[], str]) -> str:
        noun = NOUNS[rng.randrange(len(NOUNS))]
        verb = VERBS[rng.randrange(len(VERBS))]
        k = rng.randrange(22)
        p = path()
        d = p.rsplit("/", 1)[0] if "/" in p else "."
        if k < 4:
            return f"cargo test -p {noun} -- {verb}_{noun} 2>&1 | tail -n {rng.randrange(20, 120)}"
        if k < 6:
            return rng.choice(("cargo build --release 2>&1 | tail -n 30", "cargo clippy --all-targets -- -D warnings",
                               "cargo fmt --check", "cargo check -q"))
        if k < 9:
            return rng.choice(("git status --short", "git diff --stat", f"git log --oneline -n {rng.randrange(5, 40)}",
                               f"git diff -- {p}", f"git show --stat HEAD~{rng.randrange(1, 9)}"))
        if k < 12:
            return f"rg -n '{verb}_{noun}' {d}"
        if k == 12:
            return f"ls -la {d}"
        if k == 13:
            return f"sed -n '{rng.randrange(1, 400)},{rng.randrange(400, 900)}p' {p}"
        if k == 14:
            return f"head -n {rng.randrange(20, 200)} {p}"
        if k == 15:
            return f"wc -l {p} {path()}"
        if k == 16:
            return f"python3 -m pytest -q tests/test_{noun}.py -k {verb}"
        if k == 17:
            return f"find {d} -name '*.rs' | head -n {rng.randrange(10, 60)}"
        if k == 18:
            return f"jq -c '.{noun}' {p}"
        if k == 19:
            return f"make {rng.choice(('check', 'bench', 'lint', 'docs'))}"
        if k == 20:
            return f"cat {p}"
        return f"grep -rn '{noun}' {d} | head -n {rng.randrange(10, 80)}"

    def hex(self, n: int, rng: random.Random) -> str:
        return format(rng.getrandbits(4 * n), f"0{n}x")


@lru_cache(maxsize=8)
def text_source(seed: int) -> TextSource:
    """One shared instance per seed (pools are built once, read-only afterwards)."""
    return TextSource(seed)


def base62(n: int, rng: random.Random) -> str:
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choices(alphabet, k=n))


def uuid4(rng: random.Random) -> str:
    """A random (version 4) UUID from ``rng``."""
    v = rng.getrandbits(128)
    v = (v & ~(0xF << 76)) | (0x4 << 76)
    v = (v & ~(0x3 << 62)) | (0x2 << 62)
    h = f"{v:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
