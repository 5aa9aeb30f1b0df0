"""``/api/stream``: the live feed's changes as server-sent events (:mod:`agentlog.web.live`).

A client that reconnects with ``Last-Event-ID`` (or ``?last=``) gets what it
missed, or ``resync``; a comment every :data:`~agentlog.web.live.HEARTBEAT_S`
keeps proxies from closing the stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agentlog.web.live import HEARTBEAT_S
from agentlog.web.routes.common import state


async def stream(request: Request) -> Response:
    feed = state(request).feed
    last = request.headers.get("last-event-id") or request.query_params.get("last")

    async def events() -> Any:
        sent = feed.last_id
        yield b"retry: 1000\n\n"
        if last is not None and last.isdigit():
            missed = feed.since(int(last))
            if missed is None:
                yield b"event: resync\ndata: {}\n\n"
            else:
                for c in missed:
                    yield c.sse()
            sent = feed.last_id
        quiet = 0.0
        while not await request.is_disconnected():
            fresh = feed.since(sent)
            if fresh is None:
                yield b"event: resync\ndata: {}\n\n"
                sent = feed.last_id
            elif fresh:
                for c in fresh:
                    yield c.sse()
                sent = fresh[-1].id
                quiet = 0.0
            await asyncio.sleep(0.2)
            quiet += 0.2
            if quiet >= HEARTBEAT_S:
                yield b": heartbeat\n\n"
                quiet = 0.0

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


__all__ = ["stream"]
