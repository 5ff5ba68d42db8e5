"""Waiting on the daemon's events: the way tests synchronise, never by sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sessiond.client import AsyncEventStream
from sessiond.protocol.models import Event

TIMEOUT = 60.0


async def next_matching(
    stream: AsyncEventStream, match: Callable[[Event], bool], timeout: float = TIMEOUT
) -> Event:
    """The next event on `stream` that matches, within a generous timeout."""
    async with asyncio.timeout(timeout):
        async for event in stream:
            if match(event):
                return event
    raise AssertionError("the event stream ended before the event came")


def kind(name: str, session: str | None = None) -> Callable[[Event], bool]:
    return lambda e: e.kind == name and (session is None or e.session == session)
