"""The one base of every error agentlog raises on purpose, and the exit code it carries.

A command that lets an :class:`AgentlogError` escape ends with one line on stderr
(``Error: <message>``) and ``exit_code`` — never a traceback (the handler is
``cli.LazyGroup``). Exit codes follow the CLI's convention: 1 an expected failure
(something is not there, broken, or busy), 2 a usage error (a value the caller
can fix). Subclasses keep their standard base too (``ValueError``, ``LookupError``,
``RuntimeError``) so ``except ValueError`` around a parser still works.

On the hook path: standard library only, nothing imported.
"""

from __future__ import annotations


class AgentlogError(Exception):
    """An error with a message meant for a person and an exit code for the CLI."""

    exit_code: int = 1


class UsageError(AgentlogError):
    """A value the caller gave cannot be used: exit 2."""

    exit_code = 2
