"""A daemon killed mid-turn tells, when it starts again, that the turn ended: every change is an event.

Without it the log would end with `turn.started` and an editor resuming from its last seq
would show the session working forever.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

from events import TIMEOUT

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect
from sessiond.protocol.models import Event


async def replay(client: AsyncDaemon, since: int) -> list[Event]:
    """Every stored event after `since`, up to the head as of now, through a subscription."""
    head = (await client.status()).head
    seen: list[Event] = []
    if head <= since:
        return seen
    async with client.events(since=since) as stream:
        async with asyncio.timeout(TIMEOUT):
            async for event in stream:
                seen.append(event)
                if event.seq >= head:
                    break
    assert [e.seq for e in seen] == list(range(since + 1, head + 1))  # no gap, nothing twice
    return seen


async def test_a_turn_cut_off_by_a_kill_ends_as_interrupted_once_the_daemon_is_back(
    daemon: Daemon, work: Path
) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        agent = await client.agent("demo")
        idle = await agent.session(work, title="idle")
        await idle.asend("say done before the kill")
        busy = await agent.session(work, title="busy")
        await busy.asend("say a turn that ended as any does")  # (its stop reason: end_turn)
        async with client.events() as events:
            turn = asyncio.create_task(busy.asend("hang"))
            # Started, working (opened at the agent at its first turn), and a second turn queued
            # behind it: the kill comes after all three, in whatever order they came.
            seen: dict[str, Event] = {}
            behind: asyncio.Task[object] | None = None
            async with asyncio.timeout(TIMEOUT):
                async for event in events:
                    if event.session != busy.id or event.kind in seen:
                        continue
                    if event.kind == "turn.started":
                        behind = asyncio.create_task(busy.asend("say never reached"))
                    if event.kind == "turn.queued" and behind is None:
                        continue  # (the first turn's)
                    if event.kind in ("turn.started", "turn.queued") or (
                        event.kind == "session.status" and event.data["status"] == "working"
                    ):
                        seen[event.kind] = event
                    if len(seen) == 3:
                        break
            started, queued = seen["turn.started"], seen["turn.queued"]
            last_seen = max(event.seq for event in seen.values())
            await asyncio.to_thread(daemon.stop, signal.SIGKILL)
        for task in (turn, behind):
            assert task is not None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # The log's head at the kill: events stored after those seen (a throttled usage, say) are not
    # the restart's.
    db = sqlite3.connect(daemon.home / "state" / "sessiond.db")
    (killed_at,) = db.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
    db.close()
    daemon.start()
    # Stored and committed before the daemon said it serves (it listens only after).
    db = sqlite3.connect(daemon.home / "state" / "sessiond.db")
    stored = db.execute(
        "SELECT seq, kind, session, turn FROM events WHERE seq > ? ORDER BY seq", (killed_at,)
    ).fetchall()
    db.close()
    assert [(k, s, t) for _, k, s, t in stored] == [
        ("turn.ended", busy.id, started.turn),
        ("turn.ended", busy.id, queued.turn),
        ("session.status", busy.id, None),
    ]

    async with aconnect(daemon.socket, start=False) as client:
        after = await replay(client, last_seen)
        ended = [e for e in after if e.kind == "turn.ended"]
        statuses = [e for e in after if e.kind == "session.status"]
        assert [(e.session, e.turn) for e in ended] == [(busy.id, started.turn), (busy.id, queued.turn)]
        assert ended[0].agent == "demo"
        assert [e.data["outcome"] for e in ended] == ["interrupted", "interrupted"]
        # The one that ran may have done part of its work; the one behind it never reached the agent.
        assert "the daemon stopped while this turn was running" in ended[0].data["error"]
        assert "may have done part of it" in ended[0].data["error"]
        assert "before this turn reached the agent; none of it ran" in ended[1].data["error"]
        assert [(e.session, e.data["status"]) for e in statuses] == [(busy.id, "failed")]
        assert ended[0].seq < statuses[0].seq
        info = await (await client.session(busy.id)).aget()
        assert info.status == "failed"
        assert "may have done part of it" in str(info.last_error)
        assert info.last_stop_reason is None  # (the turn before's end_turn is not this one's)
        assert (await (await client.session(idle.id)).aget()).status == "idle"
        head = (await client.status()).head

    # A second start finds nothing left to announce: the turn is stored as interrupted.
    assert await asyncio.to_thread(daemon.stop) == 0
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        again = await replay(client, head)
        assert [e for e in again if e.kind in ("turn.ended", "session.status")] == []
        assert (await (await client.session(busy.id)).aget()).status == "failed"
        # And the session works again.
        reply = await (await client.session(busy.id)).asend("say back")
        assert reply.text == "back"
    db = sqlite3.connect(daemon.home / "state" / "sessiond.db")
    (state,) = db.execute("SELECT state FROM turns WHERE id = ?", (started.turn,)).fetchone()
    (told,) = db.execute(
        "SELECT COUNT(*) FROM events WHERE kind = 'turn.ended' AND turn = ?", (started.turn,)
    ).fetchone()
    db.close()
    assert state == "interrupted"
    assert told == 1
