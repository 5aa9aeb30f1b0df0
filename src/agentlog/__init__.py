"""agentlog: a tamper-evident flight recorder and memory for AI coding agents.

This package's top level stays tiny on purpose: `agentlog hook` imports it on
every hook call, and that path must load only the standard library.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
