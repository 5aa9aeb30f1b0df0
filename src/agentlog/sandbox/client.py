"""``agentlog exec -c CMD`` in Python: the same protocol as the native client
(``sandbox/native/agentlog_exec.c``), used when no C compiler built that one. Runs as
``python -I -S .../agentlog/sandbox/client.py -c CMD`` too (no ``site``: a faster start).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH, signal.SIGALRM)


def run(command: str, socket_path: str | None = None) -> int:
    """Hand ``command`` to the run's broker; its exit status (126 when there is no broker or it refused)."""
    path = socket_path if socket_path is not None else os.environ.get("AGENTLOG_RUN_SOCKET", "")
    if not path:
        sys.stderr.write("agentlog exec: not inside an agentlog run (no AGENTLOG_RUN_SOCKET)\n")
        return 126
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        sys.stderr.write(f"agentlog exec: cannot reach the run's broker at {path}: {e.strerror or e}\n")
        return 126
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/"
    parts = [os.fsencode(cwd), os.fsencode(command)] + [k + b"=" + v for k, v in os.environb.items()]
    body = b"\0".join(parts) + b"\0"
    rfd, wfd = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
    for sig in FORWARDED:
        signal.signal(sig, lambda *_: None)
    try:
        socket.send_fds(s, [b"AX1" + struct.pack(">I", len(body))], [0, 1, 2])
        s.sendall(body)
        import select

        poller = select.poll()
        poller.register(s.fileno(), select.POLLIN)
        poller.register(rfd, select.POLLIN)
        while True:
            for fd, _ev in poller.poll():
                if fd == rfd:
                    for signo in os.read(rfd, 64):
                        s.sendall(b"S" + bytes([signo]))
                    continue
                kind = s.recv(1)
                if kind == b"X":
                    data = b""
                    while len(data) < 4:
                        more = s.recv(4 - len(data))
                        if not more:
                            raise OSError("the broker went away")
                        data += more
                    status = int(struct.unpack(">i", data)[0])
                    if status >= 0:
                        return status & 0xFF
                    signal.signal(-status, signal.SIG_DFL)
                    os.kill(os.getpid(), -status)
                    return 128 - status
                text = s.recv(1024).decode("utf-8", "replace")
                sys.stderr.write(f"agentlog exec: refused by the broker: {text or 'the broker went away'}\n")
                return 126
    except OSError as e:
        sys.stderr.write(f"agentlog exec: {e}\n")
        return 126
    finally:
        s.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "-c":
        sys.stderr.write("usage: agentlog exec -c COMMAND\n")
        return 2
    return run(argv[1])


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
