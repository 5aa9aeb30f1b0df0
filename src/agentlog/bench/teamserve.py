"""What ``agentlog bench team`` runs beside the timed processes: S3 servers, a local
Ray cluster, and a poller of the resident sets of the cluster's worker processes.

All are the bench's own and live only as long as it. The S3 servers, each on a free
loopback port with its output to a file in the bench's scratch directory (never an unread
pipe): ``python -m moto.server`` (the one the tests use; it keeps objects in memory and
copies a whole object to answer a ranged GET), and s3rver (npm, pinned, installed once
into ``~/.cache/agentlog/servers``; objects in files, ranges read from the file, no
conditional writes: it ignores ``If-None-Match``, so it serves the one publisher the
bench runs and is not one to share between machines). The cluster is ``ray.cluster_utils.Cluster``, a
head and two worker nodes bound to 127.0.0.1 (the head takes no tasks: ``num_cpus=0``), so
the work runs on the two workers. Both are stopped by :meth:`stop`, which ends only the
processes they started.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlog.bench.agents.npm import Release, cache_dir, installed_binary

AWS_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"}
"""moto accepts any key; these name no real account."""
S3RVER_ENV = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1"}
"""s3rver's one built-in account (it accepts no other key)."""
S3RVER = Release(agent="s3rver", package="s3rver", version="3.7.1", binary="s3rver")
"""The pinned s3rver release."""
OBJECT_STORE_BYTES = 512 * 1024 * 1024
"""Each Ray node's shared-memory object store."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """An S3 server in its own process (moto's, or s3rver), and one bucket on it."""

    proc: subprocess.Popen[bytes]
    port: int
    bucket: str
    keys: dict[str, str] = field(default_factory=lambda: dict(AWS_ENV))
    """The credentials and region it accepts."""
    name: str = "moto"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach the server as it would reach S3."""
        return {**self.keys, "AWS_ENDPOINT_URL": self.endpoint}

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def client(self) -> Any:
        import boto3  # type: ignore[import-untyped]

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.keys["AWS_REGION"],
                            aws_access_key_id=self.keys["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.keys["AWS_SECRET_ACCESS_KEY"])

    def objects(self, prefix: str) -> tuple[int, int]:
        """Bytes and number of the objects under ``prefix/`` (listed, as S3 counts them)."""
        total = count = 0
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix.rstrip("/") + "/")
        for page in pages:
            for obj in page.get("Contents", []):
                total += int(obj["Size"])
                count += 1
        return total, count

    @classmethod
    def start(cls, log_path: str | None, bucket: str = "team", env: dict[str, str] | None = None) -> S3Server:
        """moto's server on a free loopback port (its output to ``log_path``, else discarded; ``env``
        added to its environment), waited for, with ``bucket`` made."""
        port = free_port()
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        return cls._launch(cls(_spawn(argv, log_path, env), port, bucket), log_path)

    @classmethod
    def start_s3rver(cls, data_dir: str, log_path: str | None, bucket: str = "team") -> S3Server:
        """s3rver (installed from npm first when it is not cached; needs node and npm) on a free
        loopback port, its objects under ``data_dir``, waited for, with ``bucket`` made."""
        exe = installed_binary(S3RVER, s3rver_cache())
        port = free_port()
        os.makedirs(data_dir, exist_ok=True)
        argv = [str(exe), "-d", data_dir, "-a", "127.0.0.1", "-p", str(port), "--silent"]
        return cls._launch(cls(_spawn(argv, log_path, None), port, bucket, dict(S3RVER_ENV), "s3rver"), log_path)

    @classmethod
    def _launch(cls, server: S3Server, log_path: str | None) -> S3Server:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                    break
            except OSError:
                if server.proc.poll() is not None or time.monotonic() > deadline:
                    server.stop()
                    raise RuntimeError(f"{server.name}'s S3 server did not start"
                                       f"{f' (see {log_path})' if log_path else ''}") from None
                time.sleep(0.1)
        server.client().create_bucket(Bucket=server.bucket)
        return server

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


def s3rver_cache() -> Path:
    """Where s3rver is installed: beside the agent CLIs' cache (``…/agentlog/servers``)."""
    return cache_dir().parent / "servers"


def _spawn(argv: list[str], log_path: str | None, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    log = open(log_path, "wb") if log_path else open(os.devnull, "wb")
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})
    finally:
        log.close()


@dataclass
class RayCluster:
    """A head and two worker nodes on this machine, bound to loopback (``ray.cluster_utils``)."""

    cluster: Any
    address: str

    @classmethod
    def start(cls, workers: int = 2) -> RayCluster:
        from ray.cluster_utils import Cluster

        node: dict[str, Any] = {"object_store_memory": OBJECT_STORE_BYTES, "node_ip_address": "127.0.0.1"}
        cluster: Any = Cluster(initialize_head=True, head_node_args={**node, "num_cpus": 0, "include_dashboard": False})
        try:
            for _ in range(workers):
                cluster.add_node(**node, num_cpus=1)
            cluster.wait_for_nodes(timeout=120)
        except BaseException:
            cluster.shutdown()
            raise
        return cls(cluster, str(cluster.address))

    def stop(self) -> None:
        self.cluster.shutdown()


def _is_ray_worker(proc: Any) -> bool:
    """A Ray worker process (its title ``ray::…``, or ``default_worker.py`` in its arguments)."""
    try:
        name = proc.name()
        if name.startswith("ray::"):
            return True
        return any("default_worker.py" in a for a in proc.cmdline())
    except Exception:  # gone meanwhile, or not ours to read
        return False


def _psutil() -> Any:
    """psutil: installed, or the copy Ray ships (on the path once ray is imported); None without either."""
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        try:
            import ray  # noqa: F401 - puts its third-party files, psutil among them, on the path
            import psutil
        except ImportError:
            return None
    return psutil


@dataclass
class WorkerRss:
    """Polls the summed resident set of the Ray worker processes under this process (those of
    the cluster it started) every ``interval`` seconds while a query runs; :meth:`peak` is the
    highest sum seen. Not counted: the raylets, the GCS and the object store's shared memory
    beyond the pages a worker touched (their RSS counts those)."""

    interval: float = 0.2
    _peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> int:
        psutil = _psutil()
        if psutil is None:
            return 0
        total = 0
        for proc in psutil.Process(os.getpid()).children(recursive=True):
            if _is_ray_worker(proc):
                try:
                    total += int(proc.memory_info().rss)
                except Exception:
                    pass
        return total

    def __enter__(self) -> WorkerRss:
        self._peak = self.sample()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.interval):
                self._peak = max(self._peak, self.sample())

        self._thread = threading.Thread(target=loop, name="agentlog-bench-ray-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak = max(self._peak, self.sample())

    def peak(self) -> int:
        return self._peak


__all__ = ["AWS_ENV", "OBJECT_STORE_BYTES", "S3RVER", "S3RVER_ENV", "RayCluster", "S3Server", "WorkerRss", "free_port",
           "s3rver_cache"]
