"""Settings, from ``config.toml`` in the data root.

The hook reads them on every call, so parsing TOML (``tomllib`` imports
``re``) happens only when the file changed: the parsed values are cached as
JSON in the state directory, keyed by the file's size and mtime.
Environment variables ``AGENTLOG_CAPTURE_MODE`` and ``AGENTLOG_DURABILITY``
override the file (tests and one-off runs). Standard library only (hook path).
"""

from __future__ import annotations

from agentlog.core import UsageError
from agentlog.core import oslite as os

from agentlog.core import fastjson
from agentlog.core.kinds import CAPTURE_MODES
from agentlog.core.paths import FILE_MODE, config_file, ensure_dir, state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULTS: dict[str, Any] = {
    "capture_mode": "full",
    "durability": "strict",
    "redact_secrets": True,
    "seal_idle_hours": 24,
    "retention_days": 0,
    "transcript_sync": True,
    "checkpoint_minutes": 5,
    "ship_minutes": 5,
    "ship_prune_after_days": 0,
    "capture_server": True,
    "hook_client": "native",
    "team_url": "",
    "otel_receiver": False,
    "otel_port": 4318,
    "otel_export_endpoint": "",
    "otel_export_seconds": 60,
}
CHOICES: dict[str, tuple[Any, ...]] = {
    "capture_mode": CAPTURE_MODES,
    "durability": ("strict", "relaxed"),
    "redact_secrets": (True, False),
    "transcript_sync": (True, False),
    "capture_server": (True, False),
    "hook_client": ("native", "python"),
    "otel_receiver": (False, True),
}
# free text settings: their longest length
TEXTS: dict[str, int] = {
    "team_url": 2048,
    "otel_export_endpoint": 2048,
}
# numeric settings: (least, most), ints or floats
RANGES: dict[str, tuple[float, float]] = {
    "seal_idle_hours": (0, 24 * 365),
    "retention_days": (0, 36500),
    "checkpoint_minutes": (0, 1440),
    "ship_minutes": (0, 1440),
    "ship_prune_after_days": (0, 36500),
    "otel_port": (1, 65535),
    "otel_export_seconds": (1, 86400),
}
DESCRIPTIONS: dict[str, str] = {
    "capture_mode": "full: keep content and raw payloads; metadata_only: write neither anywhere",
    "durability": "strict: fsync every append (default); relaxed: leave flushing to the OS",
    "redact_secrets": "replace secrets with [REDACTED:<rule>] before anything is written",
    "seal_idle_hours": "compress (seal) a session's log once it has been idle this many hours (`agentlog seal`)",
    "retention_days": "purge events older than this many days (content removed, hashes kept; `agentlog purge`); 0 keeps everything",
    "transcript_sync": "when a turn ends, import the agent's transcript in the background where its hooks lack outcomes (Codex: exit codes, failed patches)",
    "checkpoint_minutes": "the daemon signs a checkpoint of the Merkle tree this often while frames arrive (`agentlog checkpoint`); 0: never",
    "ship_minutes": "when this data root is enrolled with a vault (`agentlog enroll`), the daemon runs `agentlog ship` this often, "
                    "the first time soon after it starts; 0: never (fractions allowed)",
    "ship_prune_after_days": "the daemon's ship passes remove the local files of sessions the vault has fully acknowledged "
                             "and idle this many days (`agentlog ship --prune-after`); 0: never",
    "capture_server": "the daemon records the native hook's payloads sent over <data root>/run/hook.sock (without it the native hook falls back to the Python one)",
    "team_url": "where `agentlog team publish` and `team query` find the team's tables: s3://bucket/prefix "
                "(credentials from the AWS environment and config; AWS_ENDPOINT_URL for MinIO, R2, …) or file:///path; "
                "empty: none",
    "otel_receiver": "the daemon runs the OTLP/HTTP receiver of `agentlog otel serve` on 127.0.0.1:<otel_port> "
                     "(the agents' telemetry into their session logs; docs/otel.md)",
    "otel_port": "the port of the daemon's OTLP/HTTP receiver (otel_receiver)",
    "otel_export_endpoint": "an OTLP/HTTP endpoint the daemon streams sessions to as GenAI spans (`agentlog otel export` "
                            "of the sessions active since its last pass, every otel_export_seconds); empty: none",
    "otel_export_seconds": "how often the daemon exports to otel_export_endpoint",
    "hook_client": "native: `agentlog install` builds the C hook client where there is a compiler and writes it into the agents' configs; python: always the Python hook (as `install --python-hook`)",
}


class ConfigError(UsageError, ValueError):
    """config.toml is unreadable or holds a bad value."""


def validate(values: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``values``; unknown keys or bad values raise ConfigError."""
    out = dict(DEFAULTS)
    for key, value in values.items():
        if key not in DEFAULTS:
            raise ConfigError(f"unknown setting {key!r} (known: {', '.join(DEFAULTS)})")
        if key in TEXTS:
            if not isinstance(value, str) or len(value) > TEXTS[key] or any(c in value for c in "\n\r\0"):
                raise ConfigError(f"{key} must be one line of text of at most {TEXTS[key]} characters")
            out[key] = value
            continue
        if key in RANGES:
            low, high = RANGES[key]
            if type(value) not in (int, float) or not low <= value <= high:
                raise ConfigError(f"{key} must be a number from {low} to {high}, not {value!r}")
            out[key] = value
            continue
        if value not in CHOICES[key] or type(value) is not type(DEFAULTS[key]):
            raise ConfigError(f"{key} must be one of {list(CHOICES[key])}, not {value!r}")
        out[key] = value
    return out


def parse_toml(path: str) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    return validate(data)


def load(root: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Effective settings. Raises ConfigError for a bad file (the hook then uses defaults)."""
    env = os.environ if environ is None else environ
    path = config_file(root)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        values = dict(DEFAULTS)
    else:
        values = _cached(root, path, st.st_size, st.st_mtime_ns)
    for key, var in (("capture_mode", "AGENTLOG_CAPTURE_MODE"), ("durability", "AGENTLOG_DURABILITY")):
        if env.get(var):
            values = {**values, **validate({key: env[var]})}
    return values


def _cached(root: str, path: str, size: int, mtime_ns: int) -> dict[str, Any]:
    cache = os.path.join(state_dir(root), "config.cache.json")
    stamp = [size, mtime_ns]
    try:
        with open(cache, "rb") as f:
            entry = fastjson.loads(f.read().decode("utf-8"))
        if entry.get("stamp") == stamp:
            return validate(entry["values"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    values = parse_toml(path)
    try:
        ensure_dir(state_dir(root))
        # only when config.toml changed (fileio imports os and tempfile: not for every hook call);
        # not durable: a cache, parsed again from config.toml when lost
        from agentlog.core.fileio import write_atomic

        write_atomic(cache, fastjson.dumps_bytes({"stamp": stamp, "values": values}), FILE_MODE, durable=False)
    except OSError:
        pass
    return values
