"""Interoperability with a real ACP agent from npm: claude-agent-acp, with no API key.

Without a key its `session/new` still succeeds and the prompt ends at once
with "Authentication required": enough to prove the daemon speaks ACP with a
real agent, and that one agent's failure leaves the others running.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from sessiond.client import AgentError, AsyncDaemon

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "claude-agent-acp"


@pytest.fixture
def claude_command() -> list[str]:
    if shutil.which("node") is None or not AGENT.exists():
        pytest.fail(f"{AGENT} is missing: `./dev test` installs it (npm ci --prefix tests/interop)")
    return [str(AGENT)]


async def test_a_real_agent_opens_its_session_and_fails_the_turn_clearly(
    client: AsyncDaemon, work: Path, claude_command: list[str]
) -> None:
    # As root it refuses to run without IS_SANDBOX; no key, so it cannot call a model.
    claude = await client.agent(
        "claude", command=claude_command, env={"IS_SANDBOX": "1", "ANTHROPIC_API_KEY": ""}
    )
    demo = await client.agent("demo")
    session = await claude.session(work)
    bystander = await demo.session(work)
    async with client.events(agents=["demo"], kinds=["turn.started"]) as events:
        hanging = asyncio.create_task(bystander.asend("hang"))
        async for _ in events:
            break
        with pytest.raises(AgentError, match="Authentication required"):
            await session.asend("hello")
        info = await session.aget()
        assert info.agent_session_id is not None  # session/new succeeded on the first turn
        assert info.status == "failed"
        agent = await claude.aget()
        assert agent.process.state == "running"
        assert agent.process.agent_info is not None
        assert "claude" in agent.process.agent_info["name"]
        # The daemon and its other agents carried on.
        assert not hanging.done()
        await bystander.acancel()
        assert (await hanging).stop_reason == "cancelled"
        assert (await bystander.asend("say fine")).text == "fine"
