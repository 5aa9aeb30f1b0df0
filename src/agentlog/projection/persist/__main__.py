"""``python -m agentlog.projection.persist``: a worker process, one shard job (see ``workers._worker_main``)."""

from __future__ import annotations

from agentlog.projection.persist.workers import _worker_main

if __name__ == "__main__":
    _worker_main()
