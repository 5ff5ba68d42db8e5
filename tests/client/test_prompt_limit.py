"""A prompt has a size limit (the agent option max_prompt_bytes), checked before anything is stored.

Through the Python client against a real daemon and the real demo agent.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AsyncAgent, AsyncDaemon, InvalidParams, aconnect

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def real() -> Iterator[Daemon]:
    """One daemon for the module: each test reads only what it made."""
    daemon = Daemon().start()
    yield daemon
    assert daemon.stop() == 0, "\n".join(daemon.stderr)
    shutil.rmtree(daemon.home, ignore_errors=True)


@pytest.fixture
async def client(real: Daemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(real.socket, start=False) as connected:
        yield connected


async def demo_like(client: AsyncDaemon, real: Daemon, name: str, **options: object) -> AsyncAgent:
    demo = await client.agent("demo")
    command = [*demo.info.command[:-1], str(real.home / f"state-{name}")]
    return await client.agent(name, command=command, **options)


async def stored_turn_events(client: AsyncDaemon, session: str) -> list[str]:
    """The turn events the daemon stored for a session (its log, replayed up to now)."""
    async with client.trace(sessions=[session]) as events:
        return [event.kind async for event in events if str(event.kind).startswith("turn.")]


async def test_a_prompt_over_the_limit_is_refused_and_nothing_is_stored(
    client: AsyncDaemon, tmp_path: Path
) -> None:
    session = await (await client.agent("demo")).session(tmp_path)
    assert (await session.asend("say before")).text == "before"
    turns = (await session.aget()).turns
    logged = await stored_turn_events(client, session.id)

    with pytest.raises(InvalidParams) as refused:
        await session.asend("say " + "x" * MIB)
    message = str(refused.value)
    assert message == (
        "the prompt is 1,048,580 bytes, over the limit of 1,048,576 for agent 'demo'; send a shorter one, "
        "or raise the agent option max_prompt_bytes (agents.toml; maxPromptBytes in agent/update)"
    )
    assert refused.value.data["fields"] == ["prompt"]
    assert refused.value.data["limit"] == MIB

    assert (await session.aget()).turns == turns
    assert await stored_turn_events(client, session.id) == logged
    assert (await session.asend("say after")).text == "after"
    assert (await session.aget()).turns == turns + 1


async def test_the_limit_counts_utf8_bytes_not_characters(
    client: AsyncDaemon, real: Daemon, tmp_path: Path
) -> None:
    agent = await demo_like(client, real, "small", max_prompt_bytes=1000)
    session = await agent.session(tmp_path)
    with pytest.raises(InvalidParams, match=r"1,204 bytes, over the limit of 1,000 for agent 'small'"):
        await session.asend("say " + "é" * 600)  # 604 characters, 1,204 bytes
    assert (await session.asend("say " + "é" * 400)).text == "é" * 400


async def test_a_raised_limit_lets_a_larger_prompt_through(
    client: AsyncDaemon, real: Daemon, tmp_path: Path
) -> None:
    agent = await demo_like(client, real, "roomy", max_prompt_bytes=3 * MIB)
    session = await agent.session(tmp_path)
    # Comment lines are skipped by the demo agent: 2 MiB of context, then one command.
    prompt = "# " + "x" * (2 * MIB) + "\nsay taken"
    reply = await session.asend(prompt)
    assert reply.text == "taken"
    assert (await session.aget()).turns == 1


async def test_side_chats_threads_tasks_and_broadcasts_are_held_to_the_limit(
    client: AsyncDaemon, real: Daemon, tmp_path: Path
) -> None:
    agent = await demo_like(client, real, "tight", max_prompt_bytes=100)
    session = await agent.session(tmp_path)
    assert (await session.asend("say hi")).text == "hi"
    big = "say " + "x" * 200
    before = {s.id for s in await client.sessions(agent="tight", include_closed=True)}

    with pytest.raises(InvalidParams, match="the question is 204 bytes") as refused:
        await session.aside(big)
    assert refused.value.data["fields"] == ["question"]
    with pytest.raises(InvalidParams, match="the prompt is 204 bytes"):
        await session.athread(big)
    with pytest.raises(InvalidParams, match="the prompt is 204 bytes"):
        await client.broadcast(big, sessions=[session])
    with pytest.raises(InvalidParams, match="the prompt is 204 bytes"):
        await client.suggest_task("too big", big, from_session=session)

    # Nothing was opened or queued for them.
    assert {s.id for s in await client.sessions(agent="tight", include_closed=True)} == before
    assert (await session.aget()).turns == 1
    assert (await session.asend("say still here")).text == "still here"
