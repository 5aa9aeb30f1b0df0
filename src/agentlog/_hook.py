"""Fast entry point for agents' hooks: ``python -I -S .../agentlog/_hook.py <agent>``.

Run as a script with ``-I -S`` the interpreter skips ``site`` (tens of
milliseconds on machines with many ``.pth`` files), so this file puts the
directory that holds the ``agentlog`` package on ``sys.path`` itself, with
string operations: importing ``os`` here would cost the hook ~2 ms
(docs/hook-path.md). ``agentlog hook <agent>`` runs the same code, just with
a slower start.
"""

import sys

_here = __file__ if __file__.startswith("/") else sys.path[0] + "/" + __file__
sys.path.insert(0, _here.rsplit("/", 2)[0])

from agentlog.capture.hook import main  # noqa: E402

if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Skip interpreter teardown (freeing every module and object): the hook
    # has written and synced everything it writes, and it is ~1 ms per call.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        import posix

        posix._exit(code)
