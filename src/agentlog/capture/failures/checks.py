"""Compilers, type checkers and linters: the error count and the first error's place.

Hook path: standard library only, no ``re``. Each reader keys on its tool's
own line shapes (``file(3,5): error TS2322``, ``error[E0308]`` then
``--> src/main.rs:2:18``, ``✖ 2 problems (2 errors, 0 warnings)``), so words
inside messages or file names never decide anything.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    Summary = dict[str, Any]

_DIGITS = "0123456789"
_SOURCE_EXTS = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".m", ".mm", ".java", ".cs", ".swift",
                ".kt", ".scala", ".zig", ".f90")
LINKER_MARKERS = ("undefined reference to", "ld returned 1 exit status", "Undefined symbols for architecture",
                  "linker command failed", "error: linking with")


def _int(s: str) -> int | None:
    return int(s) if s and len(s) < 10 and all(ch in _DIGITS for ch in s) else None


def location(line: str) -> str | None:
    """``path:line`` from ``path:3:5: …``, ``path(3,5): …`` or ``path:3:5 - …`` (None if none)."""
    s = line.strip()
    if s.startswith("--> "):
        s = s[4:]
    for i, ch in enumerate(s):
        if ch in ":(" and i > 0 and i + 1 < len(s) and s[i + 1] in _DIGITS:
            j = i + 1
            while j < len(s) and s[j] in _DIGITS:
                j += 1
            path = s[:i].strip()
            if " " in path and not path.startswith(("/", ".")):
                path = path.rsplit(" ", 1)[-1]
            return f"{path}:{s[i + 1 : j]}" if path else None
        if ch == " " and i > 0 and s[i - 1] != ":":
            # a location has no blank before its line number (Windows drive letters aside)
            if ":" not in s[:i] and "(" not in s[:i]:
                continue
    return None


def _count_after(text: str, prefix: str, word: str) -> int | None:
    """N from the last ``<prefix>N <word>`` in ``text`` (``Found 3 errors``)."""
    at = text.rfind(prefix)
    while at >= 0:
        rest = text[at + len(prefix) :].split(" ", 2)
        if len(rest) >= 2 and rest[1].startswith(word):
            n = _int(rest[0])
            if n is not None:
                return n
        at = text.rfind(prefix, 0, at)
    return None


def _result(checker: str, klass: str, errors: int | None, first: str | None) -> Summary:
    out: Summary = {"kind": "checks", "checker": checker, "class": klass}
    if errors is not None:
        out["errors"] = errors
    if first:
        out["first_error"] = first
    return out


def _tsc(text: str) -> Summary | None:
    lines = [ln for ln in text.splitlines() if " error TS" in ln and (ln.find("): error TS") > 0 or ln.find(" - error TS") > 0)]
    if not lines and "error TS" not in text:
        return None
    if not lines:
        lines = [ln for ln in text.splitlines() if ln.lstrip().startswith("error TS")]
        if not lines:
            return None
    code = lines[0].split("error TS", 1)[1][:4]
    klass = "syntax_error" if code.startswith("1") else "dependency_missing" if code == "2307" else "type_error"
    count = _count_after(text, "Found ", "error")
    return _result("tsc", klass, count if count is not None else len(lines), location(lines[0]))


def _rustc(text: str) -> Summary | None:
    if "error[E" not in text and "error: could not compile" not in text:
        return None
    first = None
    errors = 0
    seen_error = False
    for line in text.splitlines():
        if line.startswith("error[E") or (line.startswith("error: ") and not line.startswith(("error: could not compile", "error: aborting"))):
            errors += 1
            seen_error = True
        elif seen_error and first is None and line.strip().startswith("--> "):
            first = location(line)
    count = _count_after(text, "due to ", "previous error")
    klass = "build_error" if any(m in text for m in LINKER_MARKERS) else "compile_error"
    return _result("rustc", klass, count if count is not None else errors or None, first)


def _mypy(text: str) -> Summary | None:
    if "Success: no issues found" in text:
        return _result("mypy", "type_error", 0, None)
    count = _count_after(text, "Found ", "error")
    if count is None or "source file" not in text[-400:]:
        return None
    first_line = next((ln for ln in text.splitlines() if ": error: " in ln and location(ln)), None)
    klass = "syntax_error" if first_line is not None and first_line.rstrip().endswith("[syntax]") else "type_error"
    return _result("mypy", klass, count, location(first_line) if first_line else None)


def _pyright(text: str) -> Summary | None:
    for line in reversed(text[-2000:].splitlines()):
        s = line.strip()
        words = s.replace(",", "").split()
        if len(words) >= 4 and words[1] in ("error", "errors") and words[3] in ("warning", "warnings") and _int(words[0]) is not None:
            first_line = next((ln for ln in text.splitlines() if " - error: " in ln), None)
            return _result("pyright", "type_error", int(words[0]), location(first_line) if first_line else None)
    return None


def _eslint(text: str) -> Summary | None:
    at = text.rfind("✖ ")
    if at < 0 or " problem" not in text[at : at + 40]:
        return None
    tail = text[at:].split("\n", 1)[0]
    count = _count_after(tail, "(", "error")
    current = None
    first = None
    klass = "lint_error"
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("✖"):
            current = line.strip()
            continue
        words = line.split()
        if current and len(words) >= 2 and words[1] == "error" and ":" in words[0]:
            first = f"{current}:{words[0].split(':', 1)[0]}"
            if "Parsing error:" in line:
                klass = "syntax_error"
            break
    return _result("eslint", klass, count, first)


def _ruff_like(text: str) -> Summary | None:
    """ruff (``Found 2 errors.``) and flake8/pycodestyle/pylint lines ``path.py:1:8: F401 …``."""
    count = _count_after(text, "Found ", "error")
    rule_lines = []
    for line in text.splitlines():
        head, sep, rest = line.partition(": ")
        loc = location(head + ":") if sep else None
        code = rest.split(" ", 1)[0] if sep else ""
        if loc and head.count(":") >= 1 and len(code) >= 2 and code[0].isupper() and code[1:].isdigit():
            rule_lines.append(loc)
        elif line.lstrip().startswith("--> ") and ".py:" in line:
            rule_lines.append(location(line) or "")
    if count is not None and "source file" not in text[-400:]:
        return _result("ruff", "lint_error", count, rule_lines[0] if rule_lines else None)
    if "Your code has been rated at" in text:
        return _result("pylint", "lint_error", len(rule_lines), rule_lines[0] if rule_lines else None)
    if rule_lines:
        return _result("flake8", "lint_error", len(rule_lines), rule_lines[0])
    return None


def _golangci(text: str) -> Summary | None:
    for line in reversed(text[-3000:].splitlines()):
        words = line.split()
        if len(words) == 2 and words[1] in ("issues:", "issue:") and _int(words[0]) is not None:
            first_line = next((ln for ln in text.splitlines() if ".go:" in ln and location(ln)), None)
            return _result("golangci-lint", "lint_error", int(words[0]), location(first_line) if first_line else None)
    return None


def _go_build(text: str) -> Summary | None:
    """go build/vet: ``# pkg`` then ``./x.go:3:2: msg`` lines (or such lines alone)."""
    header = text.startswith("# ") or "\n# " in text
    lines = [ln for ln in text.splitlines() if ".go:" in ln and location(ln) and not ln.startswith(("---", "ok", "FAIL"))
             and (header or ln.split(":", 1)[0].endswith(".go"))]
    if not lines:
        return None
    klass = "lint_error" if "\nvet: " in text or text.startswith("vet: ") else "compile_error"
    return _result("go", klass, len(lines), location(lines[0]))


def _c_family(text: str) -> Summary | None:
    errors: list[str] = []
    syntax = False
    for line in text.splitlines():
        at = line.find(": error: ")
        if at < 0:
            at = line.find(": fatal error: ")
        if at > 0:
            loc = location(line)
            if loc is not None and loc.rsplit(":", 1)[0].lower().endswith(_SOURCE_EXTS):
                if not errors:  # gcc/clang/javac parse errors: "expected ';' before …", "';' expected"
                    message = line[line.index("error: ", at) + 7 :]
                    syntax = message.startswith(("expected ", "stray ")) or message.endswith(" expected")
                errors.append(loc)
    linker = any(m in text for m in LINKER_MARKERS)
    if not errors and not linker:
        return None
    checker = "javac" if errors and errors[0].split(":")[0].endswith(".java") else "cc"
    if not errors:
        return _result("ld", "build_error", text.count("undefined reference to") or None, None)
    count = _count_after(text, "\n", "error")
    klass = "syntax_error" if syntax else "compile_error"
    return _result(checker, klass, count if count is not None else len(errors), errors[0])


def _formatters(text: str) -> Summary | None:
    if "would be reformatted" in text or text.startswith("would reformat ") or "\nwould reformat " in text:
        return _result("black", "lint_error", _count_after(text, "\n", "file"), None)
    if "Code style issues found" in text:
        return _result("prettier", "lint_error", None, None)
    if "\nIn " in text and " line " in text and "SC" in text and "https://www.shellcheck.net" in text:
        return _result("shellcheck", "lint_error", text.count("^-- SC") or None, None)
    return None


READERS: dict[str, Callable[[str], Optional[Summary]]] = {
    "tsc": _tsc, "rustc": _rustc, "mypy": _mypy, "pyright": _pyright, "eslint": _eslint, "ruff": _ruff_like,
    "golangci": _golangci, "go": _go_build, "cc": _c_family, "formatters": _formatters,
}
"""Each checker's reader by name (``summaries.dispatch`` picks them from the verdict lines)."""
