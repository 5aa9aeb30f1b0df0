"""Growing the Merkle tree in a process of its own, beside a long ingest (issue 28).

Hashing every frame into the tree is Python work that holds the interpreter lock: on
ingest's main thread it cost 5–6 % of a 1.45 M-event ingest here. A long ingest
(one that fills a batch) therefore hands the tree to a child process: at each flush it
sends the offsets its logs have reached, and the child catches the tree up to them
(:meth:`~agentlog.integrity.tree.FrameTree.grow` with ``upto``: it reads those frames
from the logs again and checks their hashes and links, so the tree never holds a frame
the child did not check itself). The child runs on the other core while ingest reads
and parses; ingest waits for it only at its end. It costs more CPU (each frame is
read and hashed twice) and less wall time.

The protocol is JSON lines. Ingest writes ``{"upto": {log id: offset}}`` per flush;
the worker answers each with ``{"added": n}`` or ``{"error": "…"}`` (after which it
stops growing and only answers). End of input ends the worker: a killed ingest leaves
no worker behind once its current step is done, and the tree's writer lock keeps a
late worker and the next ingest from writing at once.

``python -m agentlog.integrity.tree_worker ROOT strict|relaxed``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import IO, Any

from agentlog.core import AgentlogError


class TreeWorker:
    """The parent's side: start, feed, finish."""

    def __init__(self, root: str, *, durable: bool) -> None:
        argv = [sys.executable, "-m", "agentlog.integrity.tree_worker", root, "strict" if durable else "relaxed"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     close_fds=True)
        self.sent = 0

    def send(self, upto: dict[str, int]) -> None:
        """Ask the worker to catch the tree up to ``upto`` (log id → logical offset)."""
        if not upto:
            return
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(json.dumps({"upto": upto}, separators=(",", ":")).encode("utf-8") + b"\n")
        stdin.flush()
        self.sent += 1

    def finish(self) -> tuple[int, str | None, float]:
        """Wait for the worker: (leaves it added, its first error or None, its CPU seconds)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        added, error, answers = 0, None, 0
        for line in self.proc.stdout:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            answers += 1
            added += int(doc.get("added") or 0)
            if doc.get("error") and error is None:
                error = str(doc["error"])
        self.proc.stdout.close()
        _pid, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        if error is None and (answers < self.sent or self.proc.returncode != 0):
            error = f"the tree worker ended (exit {self.proc.returncode}) after {answers} of {self.sent} steps"
        return added, error, usage.ru_utime + usage.ru_stime

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        self.proc.wait()


def serve(root: str, durable: bool, requests: IO[bytes], answers: IO[bytes]) -> None:
    """The worker's loop (see the module docstring)."""
    from agentlog.integrity.tree import FrameTree

    tree: FrameTree | None = None
    failed: str | None = None
    for line in requests:
        started = time.perf_counter()
        reply: dict[str, Any]
        if failed is not None:
            reply = {"error": failed}
        else:
            try:
                upto = json.loads(line)["upto"]
                if tree is None:
                    tree = FrameTree(root, durable=durable)
                reply = {"added": tree.grow((), {str(k): int(v) for k, v in upto.items()})}
            except (AgentlogError, OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                failed = f"{type(e).__name__}: {e}"
                reply = {"error": failed}
        reply["secs"] = round(time.perf_counter() - started, 6)
        answers.write(json.dumps(reply).encode("utf-8") + b"\n")
        answers.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("strict", "relaxed"):
        sys.stderr.write("usage: python -m agentlog.integrity.tree_worker ROOT strict|relaxed\n")
        return 2
    serve(argv[0], argv[1] == "strict", sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["TreeWorker", "serve"]
