"""One agent's sessions spread over several of its processes (agent option `processes`): a real
daemon and real demo agent processes, driven by the Python client."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AgentUnavailable, AsyncDaemon


async def test_sessions_spread_over_the_processes_and_stay_where_they_opened(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    demo = (await client.agent("demo")).info
    agent = await client.agent("pool", command=demo.command, processes=2)
    sessions = await agent.sessions(4, work)
    await asyncio.gather(*(s.asend(f"say first {i}") for i, s in enumerate(sessions)))
    info = await agent.aget()
    assert [p.index for p in info.processes] == [0, 1]
    assert [p.state for p in info.processes] == ["running", "running"]
    assert [p.live_sessions for p in info.processes] == [2, 2]  # the least loaded each time
    assert len({p.pid for p in info.processes}) == 2
    assert all(p.memory is not None and p.memory > 1_000_000 for p in info.processes)
    assert info.process.live_sessions == 4
    assert info.process.starts == 2
    assert info.process.index is None
    assert len(daemon.children()) == 2
    listed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "sessiond.client", "agents"],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    rows = listed.stdout.splitlines()
    at = next(i for i, line in enumerate(rows) if line.startswith("pool "))
    assert "2 of 2 processes running" in rows[at], rows[at]
    for index, process in enumerate(info.processes):
        assert re.match(
            rf"  #{index} +running \(pid {process.pid}, 2 open, \d+ MiB\)", rows[at + 1 + index]
        ), rows

    # Every session is mid-turn; one process is killed: only the turns of its two sessions fail.
    doomed = info.processes[1].pid
    assert doomed is not None
    async with client.events(sessions=[s.id for s in sessions], kinds=["turn.chunk"]) as chunks:
        turns = [asyncio.create_task(s.asend("say waiting\nhang")) for s in sessions]
        seen: set[str | None] = set()
        async with asyncio.timeout(60):
            async for chunk in chunks:
                seen.add(chunk.session)
                if len(seen) == 4:
                    break
    os.kill(doomed, signal.SIGKILL)
    done, running = await asyncio.wait(turns, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    while len(done) < 2:  # the other of the two (their failures come one by one)
        more, running = await asyncio.wait(running, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert more, "the second turn of the killed process did not fail"
        done |= more
    assert len(done) == 2
    assert len(running) == 2
    for turn in done:
        assert isinstance(turn.exception(), AgentUnavailable)
    lost = [s for s, t in zip(sessions, turns, strict=True) if t in done]
    kept = [s for s, t in zip(sessions, turns, strict=True) if t in running]
    for session in kept:  # the other process's turns go on
        await session.acancel()
    assert {(await t).stop_reason for t in running} == {"cancelled"}

    # The lost sessions come back (on a new process in the slot that lost its own) with history.
    for session in lost:
        assert (await session.asend("history")).text.startswith("1. say first")
    info = await agent.aget()
    assert [p.starts for p in info.processes] == [1, 2]
    assert [p.live_sessions for p in info.processes] == [2, 2]
    assert info.processes[1].pid != doomed


async def test_max_live_sessions_holds_per_process_and_fewer_processes_move_sessions(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    demo = (await client.agent("demo")).info
    agent = await client.agent("pair", command=demo.command, processes=2, max_live_sessions=1)
    a, b = await agent.sessions(2, work)
    await a.asend("say a1")
    await b.asend("say b1")  # the other process: nothing to evict
    info = await agent.aget()
    assert [p.live_sessions for p in info.processes] == [1, 1]
    assert (await a.aget()).live
    assert (await b.aget()).live

    # One process fewer: the one that goes stops, and its session comes back at the other (which
    # makes room for it under the cap), with its history.
    async with client.events(kinds=["agent.process"]) as events:
        await client.agent("pair", processes=1)
        stopped = await next_matching(events, kind("agent.process"))
    assert stopped.data["state"] == "stopped"
    assert stopped.data["process"] == 1
    info = await agent.aget()
    assert len(info.processes) == 1
    assert len(daemon.children()) == 1
    for session, said in ((a, "say a1"), (b, "say b1")):
        assert (await session.asend("history")).text.startswith(f"1. {said}")
    assert (await agent.aget()).processes[0].live_sessions == 1


async def test_a_side_chat_opens_at_its_main_sessions_process(client: AsyncDaemon, work: Path) -> None:
    demo = (await client.agent("demo")).info
    agent = await client.agent("forking", command=demo.command, processes=2)
    main, other, third = await agent.sessions(3, work)
    await main.asend("say the main one")  # process 0
    await other.asend("say another")  # process 1
    await third.asend("say a third")  # process 0 (as loaded as 1: the first of them)
    side = await main.aside("say aside")
    assert side.reply is not None
    assert side.reply.text == "aside"
    assert side.forked  # forked from the main session at the agent: the same process
    info = await agent.aget()
    # The side chat went where its main session is, not to the less loaded process.
    assert [p.live_sessions for p in info.processes] == [3, 1]
