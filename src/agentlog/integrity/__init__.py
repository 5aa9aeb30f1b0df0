"""Merkle tree, checkpoints and proofs over the session logs (RFC 6962, C2SP)."""
