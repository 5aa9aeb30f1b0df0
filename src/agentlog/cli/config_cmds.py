"""``agentlog config``: show and change settings in config.toml."""

from __future__ import annotations

import os

import click

from agentlog.core.config import DEFAULTS, DESCRIPTIONS, RANGES, ConfigError, load, validate
from agentlog.core.paths import FILE_MODE, config_file, data_root, ensure_dir
from agentlog.cli.output import print_json, print_table


@click.group(name="config")
def config() -> None:
    """Show or change settings (capture_mode, durability, redact_secrets, seal_idle_hours)."""


@config.command(name="show")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def config_show(as_json: bool) -> None:
    """Show the effective settings and where they come from."""
    root = data_root()
    try:
        values = load(root)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        print_json(values)
        return
    print_table(
        [{"setting": k, "value": values[k], "default": DEFAULTS[k], "meaning": DESCRIPTIONS[k]} for k in DEFAULTS],
        ["setting", "value", "default", "meaning"],
        title=config_file(root),
    )


@config.command(name="set")
@click.argument("key", type=click.Choice(sorted(DEFAULTS)))
@click.argument("value")
def config_set(key: str, value: str) -> None:
    """Set KEY to VALUE in config.toml (keeps the file's other content)."""
    import tomlkit

    from agentlog.core.fileio import write_atomic

    parsed: object = value
    if isinstance(DEFAULTS[key], bool):
        if value.lower() not in ("true", "false"):
            raise click.BadParameter("must be true or false", param_hint="VALUE")
        parsed = value.lower() == "true"
    elif key in RANGES:
        try:
            number = float(value)
        except ValueError:
            raise click.BadParameter("must be a number", param_hint="VALUE") from None
        parsed = int(number) if number.is_integer() else number
    try:
        validate({key: parsed})
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="VALUE") from e
    root = data_root()
    path = config_file(root)
    ensure_dir(root)
    doc = tomlkit.document()
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            doc = tomlkit.parse(f.read())
    doc[key] = parsed
    # durable: the user's settings (a crash must not leave an empty config.toml); a temp file of
    # its own, so two `config set` at once do not write into each other's
    write_atomic(path, tomlkit.dumps(doc).encode("utf-8"), FILE_MODE, durable=True)
    click.echo(f"{key} = {str(parsed).lower() if isinstance(parsed, bool) else parsed}", err=True)
