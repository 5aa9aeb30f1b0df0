"""Fast entry point for agents' hooks: ``python -I -S .../agentlog/_hook.py <agent>``.

Run as a script with ``-I -S`` the interpreter skips ``site`` (tens of
milliseconds on machines with many ``.pth`` files), so this file puts the
directory that holds the ``agentlog`` package on ``sys.path`` itself.
``agentlog hook <agent>`` runs exactly the same code, just with a slower start.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agentlog.capture.hook import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
