"""What editors show: plan, context, changed files, transcript, attention, the fleet, replay."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect
from sessiond.protocol.models import Fleet, SessionPage, Transcript


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(work: Path) -> Path:
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "user.email", "t@example.com")
    git(work, "config", "user.name", "t")
    (work / "app.py").write_text("one\ntwo\nthree\n")
    (work / "old.txt").write_text("keep\n")
    (work / ".gitignore").write_text("ignored/\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "start")
    return work


async def test_plan_usage_and_changes_show_in_the_session(client: AsyncDaemon, repo: Path) -> None:
    # Someone else's edit before the session ran is not the session's.
    (repo / "old.txt").write_text("keep\nedited before\n")
    session = await (await client.agent("demo")).session(repo)
    async with client.events(sessions=[session.id], kinds=["session.changes"]) as events:
        await session.asend(
            "plan Read | Edit | Test\n"
            "progress 1 completed\n"
            "progress 2 in_progress\n"
            "edit app.py two => TWO\n"
            "write new.txt a\\nb\n"
            "write ignored/x.txt not counted\n"
            "usage 50000 200000 0.25\n"
            "tokens 1200 300"
        )
        changed = await next_matching(events, lambda e: len((e.data["changes"] or {}).get("files", [])) == 2)
    info = await session.aget()
    assert info.plan is not None
    assert [e.content for e in info.plan.entries] == ["Read", "Edit", "Test"]
    assert (info.plan.done, info.plan.total, info.plan.current) == (1, 3, "Edit")
    assert info.context is not None
    assert (info.context.used, info.context.size, info.context.percent) == (50000, 200000, 25.0)
    assert info.context.cost is not None
    assert info.context.cost.amount == 0.25
    assert not info.context.estimated
    assert info.usage is not None
    assert (info.usage.turns, info.usage.input_tokens, info.usage.output_tokens) == (1, 1200, 300)
    assert info.changes is not None
    files = {f.path: (f.kind, f.added, f.removed) for f in info.changes.files}
    assert files == {"app.py": ("modified", 1, 1), "new.txt": ("added", 2, 0)}
    assert changed.data["changes"]["added"] == 3
    assert info.last_activity is not None


async def test_changes_outside_git_come_from_a_snapshot(client: AsyncDaemon, work: Path) -> None:
    (work / "notes.txt").write_text("a\nb\n")
    (work / "gone.txt").write_text("x\n")
    session = await (await client.agent("demo")).session(work)
    async with client.events(sessions=[session.id], kinds=["session.changes"]) as events:
        await session.asend("edit notes.txt b => B\nwrite fresh.txt hi\nrun rm gone.txt")
        await next_matching(events, lambda e: len((e.data["changes"] or {}).get("files", [])) == 3)
    info = await session.aget()
    assert info.changes is not None
    assert info.changes.base == "snapshot"
    assert {f.path: f.kind for f in info.changes.files} == {
        "fresh.txt": "added",
        "gone.txt": "deleted",
        "notes.txt": "modified",
    }


async def test_attention_flags_and_the_fleet(client: AsyncDaemon, work: Path) -> None:
    agent = await client.agent("demo")
    busy, full, idle = await agent.sessions(3, work)
    await full.asend("usage 190000 200000 1.5")
    await idle.asend("say done")
    async with client.events(sessions=[busy.id], kinds=["permission.asked"]) as events:
        asking = asyncio.create_task(busy.asend("ask go?"))
        asked = await next_matching(events, kind("permission.asked"))
        assert "needs_you" in (await busy.aget()).attention
        assert "context_high" in (await full.aget()).attention
        fleet = await client._call("fleet/summary", Fleet)
        assert fleet.needs_you == 1
        assert fleet.by_status["needs_you"] == 1
        assert fleet.attention["context_high"] == 1
        assert fleet.open == 3
        assert fleet.cost >= 1.5
        flagged = [s.id for s in (await client._call("session/list", SessionPage, attention=True)).sessions]
        assert set(flagged) == {busy.id, full.id}
        await client.answer_permission(asked.data["permission"], None)
        await asking
    fleet = await client._call("fleet/summary", Fleet)
    assert fleet.turns == 3
    assert fleet.serial_seconds > 0
    assert fleet.wall_seconds > 0


async def test_the_fleet_is_kept_as_sessions_change_and_survives_a_restart(
    daemon: Daemon, work: Path
) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        full, plain, spent, untouched = await (await client.agent("demo")).sessions(4, work)
        await full.asend("usage 190000 200000 1.5")
        await plain.asend("say done")
        await spent.asend("usage 1000 200000 0.25")
        await spent.aclose()  # closed: its turn and cost still count, its status and flags do not
        await untouched.asend("say hello")
        fleet = await client._call("fleet/summary", Fleet)
        listed = await client._call("session/list", SessionPage, include_closed=True)
    assert fleet.open == 3
    assert fleet.by_status == {"idle": 3}
    assert fleet.attention == {"context_high": 1}
    assert fleet.turns == 4 == sum(s.turns for s in listed.sessions)
    assert fleet.cost == pytest.approx(1.75, abs=1e-3)  # the two plain turns cost a little too
    await asyncio.to_thread(daemon.stop)
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        again = await client._call("fleet/summary", Fleet)
    # Counted once from the store at start-up, the same sums as kept while running (busy time is
    # stored to the millisecond per session, so their sum may differ in the last digit).
    varying = {"wall_seconds", "serial_seconds"}
    assert again.model_dump(exclude=varying) == fleet.model_dump(exclude=varying)
    assert again.serial_seconds == pytest.approx(fleet.serial_seconds, abs=0.01)
    # Its wall time spans the same turns: none has run since the restart (it read 0).
    assert again.wall_seconds == pytest.approx(fleet.wall_seconds, abs=0.01)


async def test_stepping_between_working_sessions_keeps_its_order(client: AsyncDaemon, work: Path) -> None:
    agent = await client.agent("demo")
    sessions = await agent.sessions(5, work)
    working = [sessions[1], sessions[3], sessions[4]]
    async with client.events(kinds=["turn.started"]) as events:
        hangs = [asyncio.create_task(s.asend("hang")) for s in working]
        for _ in working:
            await next_matching(events, kind("turn.started"))
    listed = [s.id for s in await client.sessions(status="working")]
    assert listed == [s.id for s in working]  # created order: "1 of 3", "2 of 3", ...
    recent = await client._call("session/list", SessionPage, status=["working"], sort="activity", limit=2)
    assert recent.total == 3
    assert len(recent.sessions) == 2
    assert recent.next_cursor is not None
    for s in working:
        await s.acancel()
    await asyncio.gather(*hangs)


async def test_the_transcript_tail_and_ranges_survive_a_restart(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        session = await (await client.agent("demo")).session(work)
        await session.asend("say one\nsay two")
        await session.asend("think hmm\nsay three")
        tail = await client._call("session/transcript", Transcript, session=session.id, limit=3)
        whole = await client._call("session/transcript", Transcript, session=session.id, offset=0, limit=100)
    assert [ln.text for ln in tail.lines] == ["say three", "hmm", "three"]
    roles = [(ln.role, ln.text) for ln in whole.lines]
    assert roles[:4] == [("user", "say one"), ("user", "say two"), ("agent", "one"), ("agent", "two")]
    assert whole.total == len(whole.lines)
    await asyncio.to_thread(daemon.stop)
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        again = await client._call("session/transcript", Transcript, session=session.id, offset=0, limit=100)
        await (await client.session(session.id)).asend("say four")
        after = await client._call("session/transcript", Transcript, session=session.id, limit=2)
    assert again.lines == whole.lines
    assert [ln.n for ln in after.lines] == [whole.total + 0, whole.total + 1]
    assert [ln.text for ln in after.lines] == ["say four", "four"]


async def test_subscribing_with_a_snapshot_gives_state_then_events(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    await session.asend("plan a | b\nprogress 1 completed")
    sock = _raw(client.socket)
    _call(sock, 1, "initialize", {"capabilities": {}})
    answer = _call(sock, 2, "events/subscribe", {"snapshot": True, "sessions": [session.id]})["result"]
    snapshot = answer["snapshot"]
    assert snapshot["head"] == answer["head"]
    (state,) = snapshot["sessions"]
    assert state["plan"]["done"] == 1
    assert snapshot["fleet"]["open"] == 1
    await session.asend("say more")
    while True:
        message = _read(sock)
        if message.get("method") == "events/notify" and any(
            e["kind"] == "turn.chunk" for e in message["params"]["events"]
        ):
            break
    assert message["params"]["through"] >= message["params"]["events"][-1]["seq"]
    sock.close()


async def test_a_client_that_stops_reading_is_resynced_not_buffered(daemon: Daemon, work: Path) -> None:
    stalled = _raw(daemon.socket)
    _call(stalled, 1, "initialize", {"capabilities": {}})
    _call(stalled, 2, "events/subscribe", {})
    async with aconnect(daemon.socket, start=False) as client:
        agent = await client.agent("demo")
        sessions = await agent.sessions(200, work)
        chatty = "\n".join(f"say line {n} of a long reply that fills the socket" for n in range(90))
        before = daemon.rss_kib()
        await asyncio.gather(*(s.asend(chatty) for s in sessions))
        after = daemon.rss_kib()
        head = (await client.status()).head
    assert head > 10_000
    # Memory stayed bounded while nobody read (generously: not the events' size).
    assert after - before < 150_000
    # Now read: the backlog was dropped for a resync with the state as of then.
    resync = None
    while resync is None:
        message = _read(stalled)
        if message.get("method") == "events/notify" and message["params"].get("resync"):
            resync = message["params"]["resync"]
    assert resync["fleet"]["turns"] >= 1
    assert len(resync["sessions"]) == 200
    stalled.close()


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(str(path))
    sock.settimeout(120)
    return sock


def _read(sock: socket.socket) -> dict[str, object]:
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        header += sock.recv(1)
    length = next(
        int(x.split(b":")[1]) for x in header.split(b"\r\n") if x.lower().startswith(b"content-length")
    )
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return json.loads(body)  # type: ignore[no-any-return]


def _call(sock: socket.socket, msg_id: int, method: str, params: dict[str, object]) -> dict[str, object]:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    while True:
        message = _read(sock)
        if message.get("id") == msg_id:
            return message


async def test_a_closed_session_tells_its_last_state_before_it_is_closed(
    client: AsyncDaemon, work: Path
) -> None:
    """A session's state events wait for their window (a tenth of a second) to end; a session
    closing sends what waits at once, so nothing of it follows its `session.closed`."""
    demo = await client.agent("demo")
    closing, other = await demo.sessions(2, work)
    # Two plan updates and a usage update inside one window: the last ones wait for its end.
    await closing.asend("plan Read | Fix\nprogress 1 completed\nprogress 2 completed\nsay done")
    await closing.aclose()
    # Another session's turn, longer than the window: whatever was waiting is out by its end.
    await other.asend("sleep 0.5\nsay later")
    kinds = [event.kind async for event in client.trace(sessions=[closing.id])]
    assert kinds[-1] == "session.closed", kinds
    assert kinds.count("session.plan") >= 1, kinds
