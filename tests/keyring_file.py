"""A keyring backend over one JSON file, for tests: the `keyring` package's own backend API
(``keyring.set_keyring``), where no OS keyring service runs (CI, containers)."""

from __future__ import annotations

import json
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def _load(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\x1f{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        d = self._load()
        d[f"{service}\x1f{username}"] = password
        self.path.write_text(json.dumps(d))

    def delete_password(self, service: str, username: str) -> None:
        d = self._load()
        if d.pop(f"{service}\x1f{username}", None) is None:
            raise PasswordDeleteError(username)
        self.path.write_text(json.dumps(d))

    def clear(self) -> None:
        self.path.write_text("{}")
