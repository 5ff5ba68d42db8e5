"""A session's controls: the modes and config options its agent offers, chosen per session, kept
with it, said to the agent now when the session is open there and when it opens otherwise.
Driven through the Python client against a real daemon and the demo agent, whose `model` script
command says the session's model and mode as the agent holds them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AgentError, AsyncDaemon, InvalidParams, SessionClosed, aconnect


async def test_a_mode_chosen_before_the_agent_ever_ran_is_said_when_the_session_opens(
    client: AsyncDaemon, work: Path
) -> None:
    agent = await client.agent("demo")
    session = await agent.session(work)
    before = await session.acontrols()
    assert before.source == "none"
    assert not before.modes
    chosen = await session.aset_mode("plan")
    assert chosen.mode == "plan"
    assert chosen.chosen.mode == "plan"
    assert (await session.asend("model")).text == "Model: demo-small. Mode: plan."
    after = await session.acontrols()
    assert after.source == "session"
    assert [mode.id for mode in after.modes] == ["default", "plan"]
    assert after.mode == "plan"
    assert [option["id"] for option in after.config_options] == ["model"]


async def test_an_option_set_on_a_live_session_reaches_the_agent_at_once(
    client: AsyncDaemon, work: Path
) -> None:
    session = await (await client.agent("demo")).session(work)
    await session.asend("say hello")  # open at the agent now
    async with client.events(sessions=[session.id], kinds=["session.controls"]) as events:
        controls = await session.aset_option("model", "demo-large")
        told = await next_matching(events, kind("session.controls", session.id))
    option = next(o for o in controls.config_options if o["id"] == "model")
    assert option["currentValue"] == "demo-large"
    assert told.data["controls"]["chosen"]["config"] == {"model": "demo-large"}
    assert (await session.asend("model")).text == "Model: demo-large. Mode: default."


async def test_what_an_agent_does_not_offer_is_refused_with_what_it_does(
    client: AsyncDaemon, work: Path
) -> None:
    agent = await client.agent("demo")
    ran, lazy = await agent.sessions(2, work)
    await ran.asend("say hello")
    # The lazy one is checked against what the agent offered its last session.
    assert (await lazy.acontrols()).source == "agent"
    with pytest.raises(InvalidParams, match=r"offers the modes default, plan for session s\d+, not 'fast'"):
        await lazy.aset_mode("fast")
    with pytest.raises(InvalidParams, match=r"offers the options model for session s\d+, not 'effort'"):
        await ran.aset_option("effort", "high")
    with pytest.raises(InvalidParams, match="takes one of demo-small, demo-large, not 'huge'"):
        await ran.aset_option("model", "huge")
    assert (await lazy.acontrols()).chosen.mode is None  # nothing refused was kept
    await ran.aclose()
    with pytest.raises(SessionClosed, match="is closed"):
        await ran.aset_mode("plan")


async def test_a_choice_the_agent_refuses_when_the_session_opens_fails_the_turn_saying_what_to_do(
    client: AsyncDaemon, work: Path
) -> None:
    session = await (await client.agent("demo")).session(work)
    await session.aset_mode("fast")  # the agent has not said its modes: kept, asked on opening
    with pytest.raises(
        AgentError, match=r"the mode 'fast' chosen for session s\d+ was refused .*sessiond mode"
    ):
        await session.asend("say hello")
    await session.aset_mode("default")
    assert (await session.asend("model")).text == "Model: demo-small. Mode: default."


async def test_the_agent_changing_its_own_mode_is_told_and_followed(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    await session.aset_mode("plan")
    async with client.events(sessions=[session.id], kinds=["session.controls"]) as events:
        await session.asend("mode default")  # the agent leaves plan mode itself
        told = await next_matching(events, lambda e: e.data["controls"]["mode"] == "default")
    assert told.data["controls"]["chosen"]["mode"] == "default"  # a restore will not undo it
    assert (await session.acontrols()).mode == "default"


async def test_choices_outlive_a_daemon_restart(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        session = await (await client.agent("demo")).session(work)
        await session.aset_mode("plan")
        await session.aset_option("model", "demo-large")
    await asyncio.to_thread(daemon.stop)
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        again = await client.session(session.id)
        chosen = (await again.acontrols()).chosen
        assert (chosen.mode, chosen.config) == ("plan", {"model": "demo-large"})
        assert (await again.asend("model")).text == "Model: demo-large. Mode: plan."
