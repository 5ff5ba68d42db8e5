"""Clear, fast failures with a real agent (claude-agent-acp) whose model API refuses, breaks or is gone.

Claude Code retries a failed model call on its own (401 and 5xx included) with
a growing back-off: with its default of 10 retries a turn fails only after ~3
minutes, and claude-agent-acp 0.23.1 drops the `api_retry` messages Claude
Code emits meanwhile (dist/acp-agent.js, `case "api_retry"`), so nothing shows
while it waits. `CLAUDE_CODE_MAX_RETRIES` in the agent's env bounds that. With
it at 1 the turn fails in a few seconds, and the error the client sees is the
agent's own sentence ("API Error: 401 ...") plus what to do about it, which
the daemon adds from the failure's words (and the agent's log).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from events import next_matching

from bench.harness import Daemon
from sessiond.client import AsyncAgent, AsyncDaemon
from tests.daemon.interop_checks import fails_fast, module_daemon, unreachable_url
from tests.standins.anthropic import AnthropicStandIn

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "claude-agent-acp"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon(AGENT)


@pytest.fixture(scope="module")
def standin() -> Iterator[AnthropicStandIn]:
    running = AnthropicStandIn().start()
    yield running
    running.stop()


def _env(base_url: str, home: Path) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-standin",
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
        "CLAUDE_CONFIG_DIR": str(home),
        "CLAUDE_CODE_MAX_RETRIES": "1",  # the agent's own retries: one, not ten (~3 minutes)
    }


@pytest.fixture
async def refusing(
    client: AsyncDaemon, standin: AnthropicStandIn, tmp_path: Path
) -> AsyncIterator[AsyncAgent]:
    agent = await client.agent(
        "claude-refused", command=[str(AGENT)], env=_env(standin.base_url, tmp_path / "claude")
    )
    yield agent
    standin.fail_with(None)
    await agent.aremove()


async def test_a_refused_key_and_a_broken_api_fail_the_turn_fast_saying_why_and_what_to_do(
    work: Path, refusing: AsyncAgent, standin: AnthropicStandIn
) -> None:
    session = await refusing.session(work)
    standin.push("Fine.")
    assert (await session.asend("warm up")).text == "Fine."  # the agent and its session are up

    standin.fail_with(401)
    message = await fails_fast(session, "say hello")  # each failure takes ~2 s here
    assert "API Error: 401" in message  # the agent's own sentence
    assert "the stand-in answers 401" in message  # with the API's words
    assert "check the API key in its env" in message  # and what to do

    # The same session shows the next failure on its own turn. (claude-agent-acp ends the prompt
    # after a failed one at once, empty: what was left of the failed one. The daemon closes the
    # session at the agent after a turn that ended badly, and restores it.)
    standin.fail_with(500)
    message = await fails_fast(session, "say hello again")
    assert "API Error: 500" in message
    assert "failing on its side: send the prompt again later" in message

    # The API back: the session carries on, its next prompt answered with its own reply.
    standin.fail_with(None)
    standin.push("Back.")
    assert (await session.asend("and now?")).text.startswith("Back.")
    assert (await session.aget()).status != "failed"


async def test_an_unreachable_api_fails_the_turn_fast_saying_why_and_what_to_do(
    client: AsyncDaemon, work: Path, tmp_path: Path
) -> None:
    agent = await client.agent(
        "claude-unreachable", command=[str(AGENT)], env=_env(unreachable_url(), tmp_path / "claude")
    )
    session = await agent.session(work)
    message = await fails_fast(session, "say hello")
    assert "ECONNREFUSED" in message
    assert "could not reach its model API" in message
    await agent.aremove()


async def test_an_agent_retrying_its_api_in_silence_shows_so_within_seconds_and_carries_on(
    client: AsyncDaemon, work: Path, standin: AnthropicStandIn, tmp_path: Path
) -> None:
    """With its own retries left as they are (ten, ~3 minutes, and nothing said meanwhile), the
    session is flagged agent_silent and its status says since when, a few seconds in; the API
    back, the agent's next retry answers and the flag goes."""
    env = _env(standin.base_url, tmp_path / "claude")
    del env["CLAUDE_CODE_MAX_RETRIES"]
    agent = await client.agent("claude-retrying", command=[str(AGENT)], env=env, silence_seconds=2)
    session = await agent.session(work)
    standin.push("Warm.")
    assert (await session.asend("warm up")).text == "Warm."
    standin.fail_with(500)
    try:
        async with client.events(sessions=[session.id], kinds=["session.status"]) as events:
            turn = asyncio.ensure_future(session.asend("say hello"))
            said = await next_matching(events, lambda e: "detail" in e.data, timeout=60)
            assert said.data["status"] == "working"
            assert said.data["detail"].startswith("no word from the agent since ")
            assert "agent_silent" in [a.value for a in (await session.aget()).attention]
    finally:
        standin.fail_with(None)
    standin.push("Back.")
    assert (await asyncio.wait_for(turn, 240)).text.endswith("Back.")
    info = await session.aget()
    assert "agent_silent" not in [a.value for a in info.attention]
    assert info.status_detail is None
    await agent.aremove()
