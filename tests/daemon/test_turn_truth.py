"""What a turn's end tells is true when it is told: the reply carries the plan and changed
files; status says why a turn waits; the transcript keeps how a turn ended; the recap concludes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AgentError, AsyncDaemon, SessiondError
from sessiond.protocol.errors import ErrorCode


async def test_the_reply_carries_the_plan_and_changes_current_before_turn_ended(
    client: AsyncDaemon, work: Path
) -> None:
    session = await (await client.agent("demo")).session(work)
    async with client.events(sessions=[session.id], kinds=["session.changes", "turn.ended"]) as events:
        reply = await session.asend("plan Edit | Check\nprogress 1 completed\nwrite x.txt a\\nb\nsay done")
        told = []
        async with asyncio.timeout(60):
            async for event in events:
                if event.kind == "turn.ended":
                    break
                told.append(event)
    # The changes were told before the turn's end.
    assert [f["path"] for f in told[-1].data["changes"]["files"]] == ["x.txt"]
    assert reply.plan is not None
    assert (reply.plan.done, reply.plan.total) == (1, 2)
    assert reply.changes is not None
    assert [(f.path, f.added) for f in reply.changes.files] == [("x.txt", 2)]
    info = await session.aget()  # right after the answer: the same changes
    assert info.changes == reply.changes
    # Batches' replies carry them too.
    (batched,) = await (await client.agent("demo")).abatch(["plan One\nwrite y.txt y"], root=work)
    assert batched.plan is not None
    assert [e.content for e in batched.plan.entries] == ["One"]
    assert batched.changes is not None
    assert [f.path for f in batched.changes.files] == ["y.txt"]


async def test_a_turn_waiting_for_an_agent_slot_is_queued_and_says_why(
    client: AsyncDaemon, work: Path
) -> None:
    agent = await client.agent("demo", max_active_turns=1)
    a, b = await agent.sessions(2, work)
    async with client.events(kinds=["turn.chunk", "session.status"]) as events:
        # Its first words mean it is live at the agent (turn.started comes before it opens there,
        # and b, still live until then, could take its turn first).
        first = asyncio.create_task(a.asend("say waiting\nhang"))
        await next_matching(events, kind("turn.chunk", a.id))
        second = asyncio.create_task(b.asend("say after"))
        status = await next_matching(events, lambda e: e.session == b.id and e.data.get("detail"))
    assert status.data["status"] == "queued"
    assert "maxActiveTurns" in status.data["detail"]
    info = await b.aget()
    assert info.status == "queued"
    assert "maxActiveTurns" in (info.status_detail or "")
    assert (await a.aget()).status == "working"
    await a.acancel()
    await first
    assert (await second).text == "after"
    assert (await b.aget()).status_detail is None


async def test_a_turn_waiting_for_a_live_session_slot_is_queued_and_says_why(
    client: AsyncDaemon, work: Path
) -> None:
    agent = await client.agent("demo", max_live_sessions=1)
    a, b = await agent.sessions(2, work)
    await b.asend("say hello")  # the agent is up; b was live, and gives way to a
    async with client.events(kinds=["turn.chunk", "session.status"]) as events:
        # Its first words mean it is live at the agent (turn.started comes before it opens there,
        # and b, still live until then, could take its turn first).
        first = asyncio.create_task(a.asend("say waiting\nhang"))
        await next_matching(events, kind("turn.chunk", a.id))
        second = asyncio.create_task(b.asend("say after"))
        status = await next_matching(events, lambda e: e.session == b.id and e.data.get("detail"))
    assert status.data["status"] == "queued"
    assert "maxLiveSessions" in status.data["detail"]
    assert (await b.aget()).status == "queued"
    await a.acancel()
    await first
    assert (await second).text == "after"


async def test_the_transcript_keeps_how_a_turn_ended(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    async with client.events(sessions=[session.id], kinds=["turn.started"]) as events:
        hanging = asyncio.create_task(session.asend("hang"))
        await next_matching(events, kind("turn.started"))
        await session.acancel("a batch stop")
        assert (await hanging).stop_reason == "cancelled"
    with pytest.raises(AgentError):
        await session.asend("fail disk is on fire")
    lines = [(line.role, line.text) for line in (await session.atranscript()).lines]
    assert ("status", "cancelled by a client: a batch stop") in lines
    assert any(role == "status" and "failed:" in text and "disk is on fire" in text for role, text in lines)


async def test_the_recap_is_the_last_paragraph_cut_at_a_sentence(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    long = " ".join(f"Sentence number {n} is here." for n in range(20))
    await session.asend(f"say I looked around.\\n\\nAll tests pass. {long}")
    recap = (await session.aget()).recap or ""
    assert recap.startswith("All tests pass. Sentence number 0 is here.")
    assert recap.endswith("is here.")
    assert len(recap) <= 200


async def test_cli_send_json_prints_the_whole_reply(daemon: Daemon, client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "sessiond.client",
            "send",
            session.id,
            "--json",
            "plan Go\nwrite z.txt z\nsay ok",
        ],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (reply,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert reply["text"] == "ok"
    assert reply["stopReason"] == "end_turn"
    assert [e["content"] for e in reply["plan"]["entries"]] == ["Go"]
    assert [f["path"] for f in reply["changes"]["files"]] == ["z.txt"]


async def test_past_a_budget_broadcast_and_tasks_say_so_and_counts_add_up(
    client: AsyncDaemon, work: Path
) -> None:
    agent = await client.agent("demo", token_budget=100)
    spender, other = await agent.sessions(2, work)
    await spender.asend("tokens 100 100")
    with pytest.raises(SessiondError, match="token_budget") as caught:
        await client.broadcast("say hi", sessions=[other, spender])
    assert caught.value.code == ErrorCode.LIMIT_REACHED
    assert (await other.aget()).turns == 0  # nothing was queued
    task = await client.suggest_task("Later", "say later", root=work, from_session=spender)
    accepted = await client.accept_task(task.id)
    assert accepted.status == "failed"
    assert "token_budget" in (accepted.reason or "")
    # The agent's turns, and failed sessions, are counted.
    with pytest.raises(AgentError):
        await other.asend("fail no")
    assert (await agent.aget()).turns == 2
    assert (await client.fleet()).failed == 1
