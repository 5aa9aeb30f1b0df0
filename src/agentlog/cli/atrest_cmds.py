"""``agentlog keys init --at-rest``, ``unlock``, ``lock``, ``status`` and ``rotate --at-rest``:
encryption at rest of captured content (docs/encryption.md). Added to ``agentlog keys``."""

from __future__ import annotations

import sys

import click

from agentlog.cli.output import print_json, stderr, terminal_safe
from agentlog.core.paths import data_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentlog.core.atrest_keys import KeyStatus


def read_passphrase(confirm: bool, what: str = "Passphrase") -> str:
    """From the terminal (hidden, asked twice when ``confirm``), else the first line of stdin."""
    if sys.stdin.isatty():
        return str(click.prompt(what, hide_input=True, confirmation_prompt=confirm, err=True))
    line = sys.stdin.readline().rstrip("\r\n")
    if not line:
        raise click.UsageError("--passphrase: no passphrase on standard input (give it as its first line)")
    return line


def _show(st: KeyStatus, as_json: bool) -> None:
    if as_json:
        print_json(st.to_dict())
        return
    if not st.enabled:
        click.echo("encryption at rest: off")
        return
    click.echo(f"encryption at rest: on (data key {st.key_id}, {'unlocked' if st.unlocked else 'LOCKED'}; "
               f"wrapped by {', '.join(st.wraps) or 'nothing'})")
    click.echo(terminal_safe(f"derived stores: {st.derived_root}"))


def keys_init(at_rest: bool, use_keyring: bool, passphrase: bool, as_json: bool) -> None:
    """``keys init --at-rest``: the data key, and the plain warning that losing it loses content."""
    from agentlog.core.atrest_keys import LOST_KEY_WARNING, init

    if not at_rest:
        raise click.UsageError("`keys init` makes the data key of encryption at rest: pass --at-rest "
                               "(the checkpoint signing key is made on first use, see `keys show`)")
    secret = read_passphrase(True) if passphrase else None
    st = init(data_root(), passphrase=secret, use_keyring=use_keyring)
    how = " or ".join(w.replace("keyring", "OS keyring entry") for w in st.wraps)
    stderr().print(terminal_safe(LOST_KEY_WARNING.format(how=how)), markup=False)
    stderr().print("Frames written before now stay as they were (in plain); derived stores now live in memory "
                   "and are rebuilt from the logs after a reboot. Restart the daemon (agentlog daemon restart) "
                   "so it writes there too.", markup=False)
    _show(st, as_json)


def keys_unlock(passphrase: bool, as_json: bool) -> None:
    """``keys unlock``: by the keyring, or by the passphrase."""
    from agentlog.core.atrest_keys import unlock

    secret = read_passphrase(False) if passphrase else None
    _show(unlock(data_root(), secret), as_json)


def keys_lock(as_json: bool) -> None:
    """``keys lock``."""
    from agentlog.core.atrest_keys import lock, status

    root = data_root()
    done = lock(root)
    if not as_json:
        stderr().print("the data key is locked" if done else "the data key was not unlocked", markup=False)
    _show(status(root), as_json)


def keys_status(as_json: bool) -> None:
    """``keys status``."""
    from agentlog.core.atrest_keys import status

    _show(status(data_root()), as_json)


def keys_rotate_at_rest(use_keyring: bool, passphrase: bool, as_json: bool) -> None:
    """Re-wrap the data key under a new keyring entry and/or passphrase; no content is rewritten."""
    from agentlog.core.atrest_keys import rotate

    secret = read_passphrase(True, "New passphrase") if passphrase else None
    st = rotate(data_root(), passphrase=secret, use_keyring=use_keyring)
    if not as_json:
        stderr().print(f"re-wrapped data key {st.key_id} (by {', '.join(st.wraps)}); the old wraps are gone",
                       markup=False)
    _show(st, as_json)
