"""Interoperability with opencode (npm opencode-ai, `opencode acp`) against the Anthropic stand-in.

opencode-ai ships its native binary in an optional dependency
(opencode-linux-x64), so it installs from the registry alone. It is pointed
at a model API by its config: `OPENCODE_CONFIG_CONTENT` here declares a
provider "standin" using the AI SDK's Anthropic client (`npm:
@ai-sdk/anthropic`, bundled) with `options.baseURL` at the stand-in, and
makes its model the default. `OPENCODE_DISABLE_MODELS_FETCH` and friends keep
it off the network; XDG dirs under tmp keep its database private. Its tools
(write, edit, bash, todowrite) run in its own process without asking (its
default permissions allow them); it reports `usage_update` with a cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AsyncAgent, AsyncDaemon
from tests.daemon.interop_checks import kill_mid_turn, leave_mid_stream, module_daemon
from tests.daemon.test_interop_claude import eventually
from tests.standins.anthropic import AnthropicStandIn, Reply, Text

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "opencode"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon(AGENT)


@pytest.fixture(scope="module")
def standin() -> Iterator[AnthropicStandIn]:
    running = AnthropicStandIn().start()
    yield running
    running.stop()


@pytest.fixture
async def opencode(
    client: AsyncDaemon, standin: AnthropicStandIn, tmp_path: Path
) -> AsyncIterator[AsyncAgent]:
    """opencode (~5 s to start warm, ~20 s on a fresh database); one test, so one agent process.
    At most two of its sessions live at once (maxLiveSessions), for the eviction test."""
    agent = await client.agent(
        "opencode",
        command=[str(AGENT), "acp"],
        env=standin.opencode_env(tmp_path / "home"),
        max_live_sessions=2,
    )
    yield agent
    await agent.aremove()


async def test_opencode_streams_text_writes_edits_and_runs_a_command_at_the_placement(
    opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    session = await opencode.session(work)
    notes = work / "notes.txt"
    standin.push(
        Reply.tool("write", {"filePath": str(notes), "content": "hello\n"}, say="Writing the notes."),
        Reply.tool("edit", {"filePath": str(notes), "oldString": "hello", "newString": "hello world"}),
        Reply.tool("bash", {"command": "pwd > where.txt", "description": "where we are"}),
        Reply.text("All done: the notes say hello world."),
    )
    chunks: list[str] = []
    stream = session.astream("write the notes, then check where we are")
    async for event in stream:
        if event.kind == "turn.chunk":
            chunks.append(event.data["text"])
    reply = stream.reply
    assert reply is not None
    assert reply.stop_reason == "end_turn"
    assert reply.text.endswith("All done: the notes say hello world.")
    assert len(chunks) > 2
    assert notes.read_text() == "hello world\n"
    assert (work / "where.txt").read_text().strip() == str(work)
    main = standin.main_requests()
    assert len(main) == 4
    assert len(main[-1].tool_results()) == 3  # each tool's result went back to the model

    async def settled() -> bool:
        info = await session.aget()
        paths = {f.path for f in info.changes.files} if info.changes else set()
        return {"notes.txt", "where.txt"} <= paths and info.context is not None

    await eventually(settled, what="the changed files and the context fill")
    info = await session.aget()
    assert info.context is not None
    assert not info.context.estimated  # opencode sends usage_update, with a cost
    assert info.context.size == 200000
    assert info.context.cost is not None
    assert info.context.cost.amount > 0


@pytest.mark.timeout(300)  # a fresh opencode database (~20 s) and eight turns
async def test_opencode_cancels_mid_stream_evicts_with_history_and_survives_a_kill(
    client: AsyncDaemon, opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    # Cancel mid-stream: the turn ends cancelled at once, and the session carries on.
    session = await opencode.session(work)
    long = " ".join(f"word{i}" for i in range(400))
    standin.push(Reply((Text(long, chunks=400),), delay=0.05))  # ~20 s
    await leave_mid_stream(client, session)
    standin.push("Still here.")
    assert (await session.asend("are you there?")).text.endswith("Still here.")

    # maxLiveSessions 2 over three sessions: each evicted one comes back (session/load) with its history.
    sessions = [session, *(await opencode.sessions(2, work))]
    for index, each in enumerate(sessions):
        standin.push(f"Noted fruit {index}.")
        assert (await each.asend(f"remember the fruit number {index}")).text.endswith(f"Noted fruit {index}.")
        assert (await opencode.aget()).process.live_sessions <= 2
    for index, each in enumerate(sessions):
        standin.push(f"It was fruit {index}.")
        assert (await each.asend("which fruit was it?")).text.endswith(f"It was fruit {index}.")
        assert (await opencode.aget()).process.live_sessions <= 2
        texts = "\n".join(standin.main_requests()[-1].texts())
        assert f"remember the fruit number {index}" in texts
        assert f"Noted fruit {index}." in texts
        assert not any(f"remember the fruit number {i}" in texts for i in range(3) if i != index)

    # Killing the agent fails only its running turn; a demo session's turn goes on, and the
    # next turn starts opencode again.
    bystander = await (await client.agent("demo")).session(work)
    standin.push(Reply((Text("slow " * 200, chunks=200),), delay=0.05))  # ~10 s
    other = asyncio.create_task(bystander.asend("hang"))
    await kill_mid_turn(client, opencode, session)
    assert not other.done()
    await bystander.acancel()
    assert (await other).stop_reason == "cancelled"
    standin.push("Back.")
    assert (await session.asend("are you back?")).text.endswith("Back.")
    assert (await opencode.aget()).process.starts == 2
