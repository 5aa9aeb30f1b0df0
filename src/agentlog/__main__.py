"""The ``agentlog`` console script.

``agentlog hook …`` is dispatched before anything else is imported, so the
hook path stays on the standard library; every other command loads the click
CLI.
"""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from agentlog.capture.hook import main as hook_main

        return hook_main(sys.argv[2:])
    from agentlog.cli import cli

    cli()
    return 0


if __name__ == "__main__":
    sys.exit(main())
