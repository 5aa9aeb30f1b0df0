"""The failure classes: names, one-line definitions, and the old names they replace.

docs/failures.md is the long form (definitions with real examples). Classes
are content-free tokens: they are stored in ``outcome.class`` of an event and
in the ``failure_class`` columns of the projection.
"""

from __future__ import annotations

from agentlog.core.kinds import TOOL_FAILURE_CLASSES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

CLASSES: Final = TOOL_FAILURE_CLASSES
"""Every class, in the order docs/failures.md defines them."""

DEFINITIONS: Final = {
    "test_failure": "a test runner ran and reported failing or erroring tests",
    "build_error": "a build failed outside the compiler proper (linker, bundler, build tool, packaging)",
    "compile_error": "a compiler rejected the source (rustc, go build, gcc/clang, javac)",
    "type_error": "a type checker reported errors (tsc, mypy, pyright)",
    "lint_error": "a linter or formatter check reported problems (eslint, ruff, golangci-lint, go vet)",
    "syntax_error": "source could not be parsed (SyntaxError, TS1005, unexpected token)",
    "dependency_missing": "a module, package or command is not installed or cannot be found",
    "file_not_found": "a file or directory the call named does not exist",
    "string_mismatch": "an edit whose old text is absent from the file (or not unique)",
    "edit_conflict": "an edit refused because the file was not read yet or changed since it was read",
    "permission_denied": "the operating system refused access (EACCES, EPERM, not executable)",
    "policy_denied": "the agent's permission system, a hook, a sandbox or a person said no",
    "network_error": "a connection, name resolution, TLS or HTTP failure",
    "timeout": "the tool's own time limit, or `timeout`'s exit 124 (never the word in a test name)",
    "interrupted": "the person stopped the call",
    "cancelled": "the agent's harness cancelled the call (e.g. a parallel sibling failed)",
    "merge_conflict": "git stopped on conflicting changes (merge, rebase, cherry-pick, stash pop)",
    "git_error": "any other git (or git hosting CLI) failure",
    "tool_usage_error": "the agent called a tool wrongly (bad or missing parameters, unknown tool or skill)",
    "nonzero_exit": "a command exited non-zero for any other reason",
    "unknown": "a failure with no code and no recognisable signal",
}

LEGACY: Final = {
    "denied": "policy_denied",
}
"""Class names written by older versions that are not classes any more, and their
class today. Every other old name (``string_mismatch``, ``file_not_found``,
``permission_denied``, ``timeout``, ``interrupted``, ``nonzero_exit``,
``unknown``) is still a class with the same meaning, so stored data and saved
queries keep working."""


def canonical(name: str | None) -> str | None:
    """Today's class for a stored class name (old names mapped, unknown names kept)."""
    if name is None:
        return None
    return LEGACY.get(name, name)
