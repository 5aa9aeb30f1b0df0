"""The vault (issue 30): sessions shipped off the machine, end-to-end encrypted.

``crypto`` holds the keys and the sealed formats, ``protocol`` the readable
index, linkage and wire shapes, ``storage`` and ``server`` the vault itself.
docs/vault.md is the protocol as built.

The errors every vault module raises are defined here so that both sides
(machine and vault) share them.
"""

from __future__ import annotations

from agentlog.core import AgentlogError

__all__ = ["VaultError", "VaultCryptoError", "VaultAuthError", "ClockSkewError", "BodyHashError",
           "VaultProtocolError"]


class VaultError(AgentlogError):
    """Something about the vault, its keys or its protocol went wrong."""


class VaultCryptoError(VaultError):
    """A signature, a wrap or a sealed batch does not verify (or a key is malformed)."""


class VaultAuthError(VaultError):
    """A signed request is not acceptable: unknown signer, bad signature, stale timestamp."""


class ClockSkewError(VaultAuthError):
    """The request's timestamp is further than the allowed skew from the verifier's clock."""

    def __init__(self, message: str, server_time: int) -> None:
        super().__init__(message)
        self.server_time = server_time


class BodyHashError(VaultAuthError):
    """The signed body hash does not match the body received (HTTP 400, not 401)."""


class VaultProtocolError(VaultError, ValueError):
    """A request, response, index or chain id is malformed."""
