"""What test runners and checkers say about a run: counts, failing tests, the first error.

Runs on the hook path (standard library only, no ``re``). Each reader looks for
its tool's own verdict lines (pytest's ``=== 2 failed, 8 passed in 0.1s ===``,
cargo's ``test result: FAILED. 1 passed; 1 failed``, tsc's ``file(3,5): error
TS2322``), never for a bare word, so a test named ``test_timeout`` or a file
called ``not_found.py`` changes nothing.

:func:`summarize` returns a small dict (the keys below; absent when the tool
does not say) or ``None``::

    tests:   {"kind": "tests", "runner": "pytest", "passed": 8, "failed": 2,
              "skipped": 1, "errors": 0, "failing": ["tests/t.py::test_x", ...]}
    checks:  {"kind": "checks", "checker": "tsc", "errors": 3,
              "first_error": "src/a.ts:3", "class": "type_error"}
"""

from __future__ import annotations

from agentlog.capture.failures.checks import READERS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    Summary = dict[str, Any]

MAX_FAILING = 20
"""At most this many failing test ids are kept."""
TAIL = 16_384
"""Runners print their verdict at the end: the summary readers look at this many
trailing characters (failing ids may sit higher up, and are looked for in the whole text)."""
_DIGITS = "0123456789"
_SEPARATORS = str.maketrans({",": " ", ";": " ", "|": " ", "(": " ", ")": " ", "=": " "})


def _int(s: str) -> int | None:
    return int(s) if s and len(s) < 10 and all(ch in _DIGITS for ch in s) else None


def _with_failing(out: Summary, failing: list[str]) -> Summary:
    """``out`` with its failing test ids (unique, in order, at most :data:`MAX_FAILING`)."""
    names = [n for n in dict.fromkeys(failing) if n][:MAX_FAILING]
    if names:
        out["failing"] = names
    return out


def _number_word_counts(line: str, words: dict[str, str]) -> dict[str, int]:
    """``"2 failed, 8 passed"`` → ``{"failed": 2, "passed": 8}`` for the words in ``words``
    (word as printed → key); the first count of a key wins."""
    toks = line.translate(_SEPARATORS).split()
    out: dict[str, int] = {}
    for i, tok in enumerate(toks[:-1]):
        n = _int(tok)
        if n is not None:
            key = words.get(toks[i + 1].lower().rstrip(":.!,"))
            if key is not None and key not in out:
                out[key] = n
    return out


def _word_number_counts(line: str, words: dict[str, str]) -> dict[str, int]:
    """``"Failures: 1, Errors: 0"`` or ``"failures=1, errors=2"`` → counts by key."""
    out: dict[str, int] = {}
    for part in line.replace("(", ",").replace(")", ",").replace(";", ",").split(","):
        for sep in (":", "="):
            word, found, value = part.partition(sep)
            if found:
                key = words.get(word.strip().lower().split(" ")[-1])
                n = _int(value.strip().rstrip(".!"))
                if key is not None and n is not None and key not in out:
                    out[key] = n
                break
    return out


_PYTEST_WORDS = {
    "passed": "passed", "failed": "failed", "skipped": "skipped", "error": "errors", "errors": "errors",
    "xfailed": "xfailed", "xpassed": "xpassed", "deselected": "deselected",
}


def _is_duration(s: str) -> bool:
    s = s.strip().split(" ")[0]
    return s.endswith("s") and _int(s[:-1].replace(".", "", 1)) is not None


def _pytest(text: str, tail: str) -> Summary | None:
    for line in reversed(tail[-1500:].splitlines()[-12:]):  # the verdict is the last line (warnings aside)
        bare = line.strip().strip("=").strip()
        if not (bare[:1].isdigit() or bare.startswith("no tests ran")):
            continue
        at = bare.rfind(" in ")
        if at < 0 or not _is_duration(bare[at + 4 :]):
            continue
        counts = _number_word_counts(bare[:at], _PYTEST_WORDS)
        if not counts and not bare.startswith("no tests ran"):
            continue
        out: Summary = {"kind": "tests", "runner": "pytest", **counts}
        failing = _prefixed_ids(text, ("FAILED ", "ERROR "), " - ")
        if failing:
            out["failing"] = failing
        if "ERROR collecting" in text or "errors during collection" in text:
            out["collection_errors"] = True
        return out
    return None


def lines_starting(text: str, prefix: str, limit: int = MAX_FAILING * 4) -> list[str]:
    """The lines of ``text`` that start with ``prefix`` (found by searching, not by
    splitting every line), in order, at most ``limit``."""
    out: list[str] = []
    at = 0 if text.startswith(prefix) else text.find("\n" + prefix) + 1
    while at > 0 or (at == 0 and text.startswith(prefix)):
        end = text.find("\n", at)
        out.append(text[at : end if end >= 0 else len(text)])
        if end < 0 or len(out) >= limit:
            break
        at = text.find("\n" + prefix, end) + 1
        if at == 0:
            break
    return out


def _prefixed_ids(text: str, prefixes: tuple[str, ...], stop: str) -> list[str]:
    """The rest of each line starting with one of ``prefixes``, cut at ``stop``."""
    found: list[tuple[int, str]] = []
    for prefix in prefixes:
        for line in lines_starting(text, prefix):
            found.append((text.find(line), line))
    out: list[str] = []
    for _, line in sorted(found):
        rest = line[line.index(" ") + 1 :]
        cut = rest.find(stop)
        item = (rest if cut < 0 else rest[:cut]).strip()
        if item and item not in out:
            out.append(item)
            if len(out) >= MAX_FAILING:
                break
    return out


def _unittest(text: str, tail: str) -> Summary | None:
    at = tail.rfind("\nRan ")
    if at < 0 and tail.startswith("Ran "):
        at = -1
        tail = "\n" + tail
    elif at < 0:
        return None
    at = tail.rfind("\nRan ")
    if " test" not in tail[at : at + 40]:
        return None
    ran = _int(tail[at + 5 :].split(" ", 1)[0])
    if ran is None:
        return None
    verdict = tail[at:].strip().splitlines()[-1].strip()
    counts = _word_number_counts(verdict, {"failures": "failed", "errors": "errors", "skipped": "skipped"})
    if not verdict.startswith(("OK", "FAILED")):
        return None
    out: Summary = {"kind": "tests", "runner": "unittest", **counts}
    out["passed"] = max(0, ran - sum(counts.get(k, 0) for k in ("failed", "errors", "skipped")))
    failing = []
    for line in text.splitlines():
        if line.startswith(("FAIL: ", "ERROR: ")):
            name = line.split(": ", 1)[1].strip()
            if "(" in name and name.endswith(")"):
                name = name[name.index("(") + 1 : -1]
            if name not in failing:
                failing.append(name)
    return _with_failing(out, failing)


def _line_starting(tail: str, head: str, must: str = "") -> str | None:
    """The last line of ``tail`` that starts (after blanks) with ``head`` and holds ``must``."""
    if head not in tail or must not in tail:  # a line is part of tail: no line can (cheap, and common)
        return None
    for line in reversed(tail.splitlines()):
        s = line.strip()
        if s.startswith(head) and must in s:
            return s
    return None


_JEST_WORDS = {"failed": "failed", "passed": "passed", "skipped": "skipped", "todo": "skipped", "total": "total"}


def _jest(text: str, tail: str) -> Summary | None:
    line = _line_starting(tail, "Tests:", "total")
    if line is None:
        return None
    out: Summary = {"kind": "tests", "runner": "jest", **_number_word_counts(line[6:], _JEST_WORDS)}
    out.pop("total", None)
    suites = _line_starting(tail, "Test Suites:", "total")
    if suites is not None and not out.get("failed"):  # a suite that failed to run: no test ran
        bad = _number_word_counts(suites[12:], _JEST_WORDS).get("failed")
        if bad:
            out["errors"] = bad
    if "Test suite failed to run" in text:
        out["collection_errors"] = True
    failing = []
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("● ") and " › " in s and s[2:] not in failing:
            failing.append(s[2:])
    return _with_failing(out, failing)


def _vitest(text: str, tail: str) -> Summary | None:
    line = _line_starting(tail, "Tests ", "(")
    if line is None or ("passed" not in line and "failed" not in line):
        return None
    counts = _number_word_counts(line[6:], _JEST_WORDS)
    out: Summary = {"kind": "tests", "runner": "vitest", **counts}
    failing = []
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("FAIL ") and " > " in s:
            item = s[5:].strip()
            if item not in failing:
                failing.append(item)
    return _with_failing(out, failing)


def _mocha(text: str, tail: str) -> Summary | None:
    counts: dict[str, int] = {}
    for line in tail.splitlines():
        s = line.strip()
        for word, key in (("passing", "passed"), ("failing", "failed"), ("pending", "skipped")):
            first, _, rest = s.partition(" ")
            if rest.startswith(word) and _int(first) is not None:
                counts[key] = int(first)
    if "passed" not in counts and "failed" not in counts:
        return None
    out: Summary = {"kind": "tests", "runner": "mocha", **counts}
    at = tail.rfind(" failing")
    failing: list[str] = []
    lines = tail[at:].splitlines()[1:] if at >= 0 else []
    for i, line in enumerate(lines):
        head, _, rest = line.strip().partition(") ")
        if not rest or _int(head) is None:
            continue
        parts = [rest]
        for more in lines[i + 1 : i + 6]:  # "1) suite" then the test's title lines, the last ending in ":"
            if not more.strip() or parts[-1].endswith(":"):
                break
            parts.append(more.strip())
        name = " ".join(parts).rstrip(":")
        if name not in failing:
            failing.append(name)
    return _with_failing(out, failing)


def _go_test(text: str, tail: str) -> Summary | None:
    failed = text.count("--- FAIL: ")
    bad_pkgs = text.count("\nFAIL\t") + text.startswith("FAIL\t")
    ok_pkgs = text.count("\nok  \t") + text.startswith("ok  \t")
    if not (failed or bad_pkgs or ok_pkgs):
        return None
    out: Summary = {"kind": "tests", "runner": "go test", "failed": failed}
    passed = text.count("--- PASS: ")
    if passed:
        out["passed"] = passed
    skipped = text.count("--- SKIP: ")
    if skipped:
        out["skipped"] = skipped
    out["packages_failed"] = bad_pkgs
    out["packages_ok"] = ok_pkgs
    if "[build failed]" in text or "[setup failed]" in text:
        out["build_failed"] = True
    failing = []
    for line in text.splitlines():
        at = line.find("--- FAIL: ")
        if at >= 0:
            name = line[at + 10 :].split(" (", 1)[0].strip()
            if name and name not in failing:
                failing.append(name)
    return _with_failing(out, failing)


def _cargo(text: str, tail: str) -> Summary | None:
    totals: dict[str, int] = {}
    found = False
    for line in text.splitlines():
        if line.startswith("test result: "):
            found = True
            got = _number_word_counts(line, {"passed": "passed", "failed": "failed", "ignored": "skipped"})
            for k, v in got.items():
                totals[k] = totals.get(k, 0) + v
    summary_line = _line_starting(tail, "Summary [", "tests run:")
    if summary_line is not None:  # cargo nextest
        totals = _number_word_counts(summary_line, {"passed": "passed", "failed": "failed", "skipped": "skipped"})
        found = True
    if not found:
        return None
    out: Summary = {"kind": "tests", "runner": "cargo test", **totals}
    failing = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("test ") and s.endswith(" ... FAILED"):
            name = s[5:-11]
        elif s.startswith("FAIL [") and "]" in s:
            name = s.split("]", 1)[1].strip()
        else:
            continue
        if name not in failing:
            failing.append(name)
    return _with_failing(out, failing)


def _rspec(text: str, tail: str) -> Summary | None:
    line = next((ln.strip() for ln in reversed(tail.splitlines())
                 if " example" in ln and "failure" in ln and _int(ln.strip().split(" ", 1)[0]) is not None), None)
    if line is None:
        return None
    counts = _number_word_counts(line, {"examples": "total", "example": "total", "failures": "failed",
                                        "failure": "failed", "pending": "skipped"})
    total = counts.pop("total", 0)
    counts["passed"] = max(0, total - counts.get("failed", 0) - counts.get("skipped", 0))
    out: Summary = {"kind": "tests", "runner": "rspec", **counts}
    failing = _prefixed_ids(text, ("rspec ",), " # ")
    if failing:
        out["failing"] = failing
    return out


_XUNIT_WORDS = {"failures": "failed", "errors": "errors", "skipped": "skipped", "tests": "total",
                "failed": "failed", "passed": "passed", "total": "total", "run": "total"}


def _phpunit(text: str, tail: str) -> Summary | None:
    line = _line_starting(tail, "Tests: ", "Assertions:") or _line_starting(tail, "OK (", "assertion")
    if line is None:
        return None
    counts = _word_number_counts(line, _XUNIT_WORDS) if line.startswith("Tests:") else _number_word_counts(line, _XUNIT_WORDS)
    total = counts.pop("total", 0)
    counts["passed"] = max(0, total - sum(counts.get(k, 0) for k in ("failed", "errors", "skipped")))
    out: Summary = {"kind": "tests", "runner": "phpunit", **counts}
    failing = []
    for raw in text.splitlines():
        head, _, rest = raw.partition(") ")
        if rest and "::" in rest and _int(head) is not None and rest.strip() not in failing:
            failing.append(rest.strip())
    return _with_failing(out, failing)


def _dotnet(text: str, tail: str) -> Summary | None:
    line = _line_starting(tail, "Failed!", "Total:") or _line_starting(tail, "Passed!", "Total:")
    if line is None:
        return None
    counts = _word_number_counts(line.split("-", 1)[-1], _XUNIT_WORDS)
    counts.pop("total", None)
    out: Summary = {"kind": "tests", "runner": "dotnet test", **counts}
    failing = []
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("Failed ") and s.endswith("]") and " [" in s:
            name = s[7 : s.rindex(" [")]
            if name not in failing:
                failing.append(name)
    return _with_failing(out, failing)


def _jvm(text: str, tail: str) -> Summary | None:
    """Maven surefire (``Tests run: 5, Failures: 1, Errors: 0, Skipped: 0``) and Gradle
    (``5 tests completed, 1 failed``)."""
    maven = None
    if "Tests run:" in tail and "Failures:" in tail:  # else no line of tail holds both
        for line in reversed(tail.splitlines()):
            if "Tests run:" in line and "Failures:" in line and "Time elapsed" not in line:
                maven = line
                break
    if maven is not None:
        counts = _word_number_counts(maven[maven.index("Tests run:"):], _XUNIT_WORDS)
        total = counts.pop("total", 0)
        counts["passed"] = max(0, total - sum(counts.get(k, 0) for k in ("failed", "errors", "skipped")))
        out: Summary = {"kind": "tests", "runner": "maven", **counts}
        failing = []
        for raw in text.splitlines():
            s = raw.replace("[ERROR]", "").strip()
            if raw.startswith("[ERROR]   ") and "." in s.split(" ")[0] and ":" in s.split(" ")[0]:
                name = s.split(" ")[0].rsplit(":", 1)[0]
                if name not in failing:
                    failing.append(name)
        return _with_failing(out, failing)
    gradle = _line_starting(tail, "", "tests completed")
    if gradle is None or _int(gradle.split(" ", 1)[0]) is None:
        return None
    line = gradle
    counts = _number_word_counts(line, {"tests": "total", "failed": "failed", "skipped": "skipped"})
    total = counts.pop("total", 0)
    counts["passed"] = max(0, total - counts.get("failed", 0) - counts.get("skipped", 0))
    out = {"kind": "tests", "runner": "gradle", **counts}
    failing = []
    for raw in text.splitlines():
        s = raw.strip()
        if s.endswith(" FAILED") and " > " in s and s[:-7] not in failing:
            failing.append(s[:-7])
    return _with_failing(out, failing)


def _tap(text: str, tail: str) -> Summary | None:
    """node --test and other TAP producers: ``# pass 1`` / ``# fail 1`` / ``# skipped 1``."""
    counts: dict[str, int] = {}
    for line in tail.splitlines()[-40:]:
        word, _, n = line.strip().lstrip("#").strip().partition(" ")
        key = {"pass": "passed", "fail": "failed", "skipped": "skipped", "todo": "skipped"}.get(word)
        if key is not None and _int(n) is not None:
            counts[key] = counts.get(key, 0) + int(n)
    if "passed" not in counts and "failed" not in counts:
        return None
    out: Summary = {"kind": "tests", "runner": "tap", **counts}
    failing = []
    for line in text.splitlines():
        if line.startswith("not ok ") and " - " in line:
            name = line.split(" - ", 1)[1].split(" # ", 1)[0].strip()
            if name not in failing:
                failing.append(name)
    return _with_failing(out, failing)


_TEST_READERS: dict[str, Callable[[str, str], Optional[Summary]]] = {
    "pytest": _pytest, "unittest": _unittest, "jest": _jest, "vitest": _vitest, "mocha": _mocha, "go test": _go_test,
    "cargo": _cargo, "rspec": _rspec, "phpunit": _phpunit, "dotnet": _dotnet, "jvm": _jvm, "tap": _tap,
}
VERDICT_LINES = 40
"""Runners and checkers print their verdict in the last lines: the words of this many
(from the last 4 KB) pick the readers; mocha prints its counts before the failures'
details, so its counts are also looked for further up when nothing else matched."""
_PUNCTUATION = b"!\"#%&'()*+,-./:;<=>?@[\\]^_`{|}~$\t"
PUNCT = bytes.maketrans(_PUNCTUATION, b" " * len(_PUNCTUATION))
"""Punctuation → blanks (a byte table: ``bytes.translate`` is a table lookup a byte)."""
_READER_WORDS: tuple[tuple[str, frozenset[bytes]], ...] = tuple((name, frozenset(words.encode().split())) for name, words in (
    ("cargo", "result summary"),
    ("pytest", "passed failed error errors skipped xfailed deselected ran"),
    ("unittest", "ran"),
    ("jest", "tests"),
    ("vitest", "tests"),
    ("go test", "fail ok"),
    ("mocha", "passing failing pending"),
    ("rspec", "examples example"),
    ("phpunit", "assertions"),
    ("dotnet", "total"),
    ("jvm", "tests completed"),
    ("tap", "pass fail"),
    ("tsc", "found"),
    ("mypy", "found success"),
    ("pyright", "informations information"),
    ("eslint", "✖ problems problem"),
    ("golangci", "issues issue"),
    ("go", "go"),
    ("cc", "undefined collect2 linker generated"),
    ("ruff", "found rated"),
    ("formatters", "reformatted reformat style shellcheck"),
))
_ERROR_LINES: tuple[tuple[str, str], ...] = (
    ("error TS", "tsc"), ("error[E", "rustc"), ("could not compile", "rustc"), (": error: ", "cc"),
    (": fatal error: ", "cc"),
)


def words_of(block: str) -> frozenset[bytes]:
    """The lower-case words of a block of lines, as bytes (punctuation splits words)."""
    return frozenset(block.lower().encode("utf-8", "surrogatepass").translate(PUNCT).split())


def dispatch(words: frozenset[bytes], block: str) -> list[str]:
    """The readers the words of the verdict lines call for, in the order they are tried."""
    out = [name for name, keys in _READER_WORDS if not keys.isdisjoint(words)]
    if b"error" in words or b"errors" in words:  # a compiler's own error lines come before word guesses
        first = len([n for n in out if n in _TEST_READERS])
        for needle, name in _ERROR_LINES:
            if needle in block:
                if name in out:
                    out.remove(name)
                out.insert(first, name)
                first += 1
    return out


def summarize(text: str, tail: str | None = None, words: frozenset[bytes] | None = None) -> Summary | None:
    """A test runner's summary, else a checker's or compiler's, else None. The readers are
    picked from the words of the last :data:`VERDICT_LINES` lines of ``tail`` (default: the
    last 4 KB of ``text``), or ``words`` when the caller has them; they read ``text`` (the
    caller bounds it)."""
    if not text:
        return None
    block = "\n".join((tail if tail is not None else text[-4096:]).splitlines()[-VERDICT_LINES:])
    names = dispatch(words if words is not None else words_of(block), block)
    tests = None
    for name in names:
        reader = _TEST_READERS.get(name)
        if reader is not None:
            tests = reader(text, text[-TAIL:])
            if tests is not None:
                break
    if tests is None and "mocha" not in names and " passing (" in text:
        tests = _mocha(text, text[-TAIL:])
    if tests is not None and not tests.get("build_failed"):
        return tests
    checks = None
    for name in names:
        check = READERS.get(name)
        if check is not None:
            checks = check(text)
            if checks is not None:
                break
    if tests is not None:  # a test run that did not build: the compiler's count and first error
        for key in ("errors", "first_error"):
            if checks is not None and key in checks:
                tests[key] = checks[key]
        return tests
    return checks


def describe(summary: Summary | None) -> str | None:
    """One line for people: ``3 of 212 tests failed: test_x, test_y, test_z and 4 more`` or
    ``tsc: 3 errors, first at src/a.ts:3``."""
    if not summary:
        return None
    if summary.get("kind") == "tests":
        failed = int(summary.get("failed", 0) or 0) + int(summary.get("errors", 0) or 0)
        total = failed + int(summary.get("passed", 0) or 0) + int(summary.get("skipped", 0) or 0)
        names = summary.get("failing") or []
        if failed:
            text = f"{failed} of {total} tests failed" if total else f"{failed} tests failed"
            if names:
                shown = ", ".join(str(n) for n in names[:3])
                text += ": " + shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            return text
        if summary.get("build_failed"):
            return "tests did not build"
        return f"{summary.get('passed', 0)} tests passed" + (
            f", {summary['skipped']} skipped" if summary.get("skipped") else "")
    errors = summary.get("errors")
    text = str(summary.get("checker", "check"))
    if errors is not None:
        text += f": {errors} error" + ("" if errors == 1 else "s")
    if summary.get("first_error"):
        text += f", first at {summary['first_error']}"
    return text
