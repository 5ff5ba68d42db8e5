"""A turn whose agent does not end it when told (session/cancel) is cut off by the daemon: after
CANCEL_GRACE while its prompt runs, at once while it is still opening at the agent. Either way it
ends cancelled, its answer says so, and the session is counted stopped with its turn ended.

A real daemon and the Python client; the agent is `scripted_agent.py` (a real process speaking
ACP on its stdin and stdout), since the demo agent always obeys a cancel.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from events import kind, next_matching
from scripted_agent import scripted_agent

from bench.harness import Daemon
from sessiond.client import AgentUnavailable, AsyncAgent, AsyncDaemon
from sessiond.daemon.core import CANCEL_GRACE
from tests.daemon.test_interop_claude import eventually

pytestmark = pytest.mark.timeout(120)


async def _agent(client: AsyncDaemon, tmp_path: Path, mode: str) -> AsyncAgent:
    return await client.agent(mode, command=scripted_agent(tmp_path, mode))


async def test_a_prompt_the_agent_goes_on_with_is_cut_off_after_the_grace(
    client: AsyncDaemon, daemon: Daemon, tmp_path: Path, work: Path
) -> None:
    agent = await _agent(client, tmp_path, "works-on")
    session = await agent.session(work)
    async with client.events(sessions=[session.id], kinds=["turn.chunk"]) as events:
        turn = asyncio.ensure_future(session.asend("work on"))
        await next_matching(events, kind("turn.chunk"))  # its prompt is at the agent
    assert await session.acancel() == 1
    reply = await asyncio.wait_for(turn, CANCEL_GRACE + 60)
    assert reply.stop_reason == "cancelled"
    daemon.wait_for_line("did not end turn", timeout=30)
    info = await session.aget()
    assert (info.status, info.turns) == ("stopped", 1)  # (a cancelled turn stops a session)


async def test_a_turn_still_opening_at_the_agent_is_cut_off_at_once(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    agent = await _agent(client, tmp_path, "opens-once")
    first = await agent.session(work)
    assert (await first.asend("opens")).stop_reason == "end_turn"  # the agent is up
    stuck = await agent.session(work)
    async with client.events(sessions=[stuck.id], kinds=["turn.started"]) as events:
        turn = asyncio.ensure_future(stuck.asend("never opened"))
        await next_matching(events, kind("turn.started"))
    assert await stuck.acancel() == 1
    # Long before the agent's session/new deadline (two minutes), and the grace.
    reply = await asyncio.wait_for(turn, CANCEL_GRACE / 2)
    assert reply.stop_reason == "cancelled"
    assert (await stuck.aget()).turns == 1
    # The session the agent answered goes on.
    assert (await first.asend("again")).stop_reason == "end_turn"


async def test_a_session_the_agent_does_not_open_in_time_fails_its_turn_saying_so(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    agent = await client.agent(
        "slow-opener", command=scripted_agent(tmp_path, "opens-once"), session_timeout=1.0
    )
    first = await agent.session(work)
    assert (await first.asend("opens")).stop_reason == "end_turn"
    stuck = await agent.session(work)
    with pytest.raises(AgentUnavailable) as failed:
        await asyncio.wait_for(stuck.asend("never opened"), 60)
    said = str(failed.value)
    assert "did not answer session/new within 1 s" in said
    assert "max_opening_sessions in agents.toml, or `sessiond batch --max-concurrency N`" in said
    assert "a longer session_timeout" in said
    assert "the daemon failed" not in said  # (it was the agent's silence, not the daemon's fault)
    info = await stuck.aget()
    assert (info.turns, info.status) == (1, "failed")
    assert (await first.asend("again")).stop_reason == "end_turn"  # the agent goes on


async def test_a_session_the_agent_opens_after_it_was_given_up_is_closed_there(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    """claude-agent-acp keeps a Claude Code process for each session it opens: one it opened after
    the daemon gave up on it (past session_timeout) would be held until the agent stops."""
    agent = await client.agent(
        "late-opener", command=scripted_agent(tmp_path, "opens-late"), session_timeout=0.5
    )
    session = await agent.session(work)
    with pytest.raises(AgentUnavailable, match=r"did not answer session/new within 0\.5 s"):
        await asyncio.wait_for(session.asend("hello"), 60)
    closed = tmp_path / "closed.txt"

    async def closed_at_the_agent() -> bool:
        return closed.exists() and closed.read_text().split() == ["s1"]

    await eventually(closed_at_the_agent, what="session/close of the session opened late")


async def test_an_agent_is_asked_to_open_at_most_max_opening_sessions_at_once(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    agent = await client.agent(
        "opens-slowly", command=scripted_agent(tmp_path, "opens-slowly"), max_opening_sessions=2
    )
    sessions = await agent.sessions(5, work)
    async with client.events(sessions=[s.id for s in sessions], kinds=["session.status"]) as events:
        replies = await asyncio.wait_for(asyncio.gather(*(s.asend("hello") for s in sessions)), 60)
        # The ones waiting for others to be opened first show queued, saying so.
        waiting = await next_matching(events, lambda e: e.data.get("status") == "queued")
    assert [reply.stop_reason for reply in replies] == ["end_turn"] * 5
    assert int((tmp_path / "opening.txt").read_text()) <= 2
    assert waiting.data["detail"] == (
        "opening at agent 'opens-slowly', which is asked to open 2 sessions at a time (maxOpeningSessions)"
    )
    assert {(await s.aget()).status for s in sessions} == {"idle"}


async def test_a_live_cap_does_not_make_sessions_open_one_at_a_time(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    """Under maxLiveSessions, room is made one session at a time, but the openings go on side by
    side (claude-agent-acp has a cap by default, and was opened one at a time)."""
    agent = await client.agent(
        "opens-slowly",
        command=scripted_agent(tmp_path, "opens-slowly"),
        max_opening_sessions=3,
        max_live_sessions=4,
    )
    sessions = await agent.sessions(4, work)
    replies = await asyncio.wait_for(asyncio.gather(*(s.asend("hello") for s in sessions)), 60)
    assert [reply.stop_reason for reply in replies] == ["end_turn"] * 4
    assert int((tmp_path / "opening.txt").read_text()) == 3  # (each opening takes 0.5 s)
    assert (await agent.aget()).process.live_cap == 4


async def test_sessions_waiting_to_be_opened_outlive_their_agent_process(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    """A process killed while sessions waited their turn to be opened there (and one was being
    opened) is started again for them: nothing of their turns but the opening was asked of it.
    (A batch on a four-process agent lost every prompt queued for the killed one.)"""
    agent = await client.agent(
        "opens-slowly", command=scripted_agent(tmp_path, "opens-slowly"), max_opening_sessions=1
    )
    sessions = await agent.sessions(3, work)
    async with client.events(sessions=[s.id for s in sessions], kinds=["session.status"]) as events:
        turns = asyncio.ensure_future(asyncio.gather(*(s.asend("hello") for s in sessions)))
        await next_matching(events, lambda e: e.data.get("status") == "queued")  # one is being opened
    pid = (await agent.aget()).process.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    replies = await asyncio.wait_for(turns, 60)
    assert [reply.stop_reason for reply in replies] == ["end_turn"] * 3
    assert (await agent.aget()).process.starts == 2
