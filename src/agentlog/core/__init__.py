"""The shared kernel: paths, ids, the event model, JSON and file helpers — and the one error base.

Imports nothing else from agentlog. The modules the hook imports (``oslite``,
``fastjson``, ``ids``, ``kinds``, ``paths``, ``config``) use the standard library only.

:class:`AgentlogError` is defined here, in the package the hook loads anyway,
rather than in a module of its own: every hook-path module that defines an
error (``log.frame``, ``core.fastjson``, ``core.config``) needs it, and one more
module on the hook path costs ~0.1 ms (docs/hook-path.md).

The error base: a command that lets an :class:`AgentlogError` escape ends with
one line on stderr (``Error: <message>``) and ``exit_code`` — never a traceback
(the handler is ``cli.LazyGroup``). Exit codes follow the CLI's convention: 1 an
expected failure (something is not there, broken, or busy), 2 a usage error (a
value the caller can fix). Subclasses keep their standard base too
(``ValueError``, ``LookupError``, ``RuntimeError``) so ``except ValueError``
around a parser still works.
"""

from __future__ import annotations


class AgentlogError(Exception):
    """An error with a message meant for a person and an exit code for the CLI."""

    exit_code: int = 1


class UsageError(AgentlogError):
    """A value the caller gave cannot be used: exit 2."""

    exit_code = 2
