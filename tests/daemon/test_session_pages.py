"""session/list pages by activity and by attention, as a client steps through them: every
session once, most recent first, while sessions work and across a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect
from sessiond.client.errors import InvalidParams
from sessiond.protocol.models import SessionPage


async def pages(client: AsyncDaemon, **params: Any) -> tuple[list[str], list[int]]:
    """Every session's id, page by page (two a page); and the totals each page said."""
    ids: list[str] = []
    totals: list[int] = []
    cursor: str | None = None
    while True:
        page = await client._call("session/list", SessionPage, limit=2, cursor=cursor, **params)
        ids += [s.id for s in page.sessions]
        totals.append(page.total)
        if page.next_cursor is None:
            return ids, totals
        cursor = page.next_cursor


async def test_pages_by_activity_hold_every_session_once_most_recent_first(
    daemon: Daemon, work: Path
) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        a, b, c, d, e, f = await (await client.agent("demo")).sessions(6, work)
        await c.asend("say first")
        await a.asend("say second")
        # Opened together, the idle ones share their activity: oldest first among them.
        assert await pages(client, sort="activity") == ([a.id, c.id, b.id, d.id, e.id, f.id], [6, 6, 6])
        async with client.events(kinds=["turn.started"]) as events:
            hang = asyncio.create_task(e.asend("hang"))
            await next_matching(events, kind("turn.started"))
            # Working now: its activity is in memory, ahead of its stored row.
            assert (await pages(client, sort="activity"))[0] == [e.id, a.id, c.id, b.id, d.id, f.id]
            working, _ = await pages(client, sort="activity", status=["working"])
            assert working == [e.id]
            await e.acancel()
            await hang
        await d.aclose()
        expected = [e.id, a.id, c.id, b.id, f.id]
        assert (await pages(client, sort="activity"))[0] == expected
        with_closed, _ = await pages(client, sort="activity", include_closed=True)
        assert with_closed == [d.id, *expected]  # closing is its latest change
        assert await pages(client) == ([a.id, b.id, c.id, e.id, f.id], [5, 5, 5])
    await asyncio.to_thread(daemon.stop)
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        assert (await pages(client, sort="activity"))[0] == expected
        assert (await pages(client, sort="activity", include_closed=True))[0] == [d.id, *expected]


async def test_attention_pages_hold_the_flagged_sessions(client: AsyncDaemon, work: Path) -> None:
    full, plain, fuller = await (await client.agent("demo")).sessions(3, work)
    await fuller.asend("usage 190000 200000")
    await plain.asend("say done")
    await full.asend("usage 180000 200000")
    assert await pages(client, attention=True) == ([full.id, fuller.id], [2])
    assert await pages(client, attention=True, sort="activity") == ([full.id, fuller.id], [2])
    await full.aclose()
    assert await pages(client, attention=True) == ([fuller.id], [1])


@pytest.mark.parametrize(
    ("sort", "cursor"), [("activity", "12"), ("activity", "soon/3"), ("created", "1764600000.5/3")]
)
async def test_a_cursor_of_another_sort_is_refused_saying_so(
    client: AsyncDaemon, sort: str, cursor: str
) -> None:
    with pytest.raises(InvalidParams, match="not a cursor this daemon gave for sort="):
        await client._call("session/list", SessionPage, sort=sort, cursor=cursor)
