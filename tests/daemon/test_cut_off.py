"""A turn whose agent does not end it when told (session/cancel) is cut off by the daemon: after
CANCEL_GRACE while its prompt runs, at once while it is still opening at the agent. Either way it
ends cancelled, its answer says so, and the session is counted stopped with its turn ended.

A real daemon and the Python client; the agent is a small ACP agent written here (a real process
speaking ACP on its stdin and stdout), since the demo agent always obeys a cancel.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AsyncDaemon
from sessiond.daemon.core import CANCEL_GRACE

pytestmark = pytest.mark.timeout(120)

# "ignores": its prompts work on until the process ends, whatever it is told (saying so first);
# "opens-slowly": it answers the first session/new only, and a prompt at once.
AGENT = r"""
import json, sys
mode = sys.argv[1]
opened = 0
def answer(id, result):
    print(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}), flush=True)
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        answer(message["id"], {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})
    elif method == "session/new":
        opened += 1
        if mode == "ignores" or opened == 1:
            answer(message["id"], {"sessionId": f"a{opened}"})
    elif method == "session/prompt" and mode == "opens-slowly":
        answer(message["id"], {"stopReason": "end_turn"})
    elif method == "session/prompt":
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "on it"}}
        params = {"sessionId": message["params"]["sessionId"], "update": update}
        print(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}), flush=True)
"""


async def _agent(client: AsyncDaemon, tmp_path: Path, mode: str) -> object:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    return await client.agent(mode, command=[sys.executable, str(script), mode])


async def test_a_prompt_the_agent_goes_on_with_is_cut_off_after_the_grace(
    client: AsyncDaemon, daemon: Daemon, tmp_path: Path, work: Path
) -> None:
    agent = await _agent(client, tmp_path, "ignores")
    session = await agent.session(work)  # type: ignore[attr-defined]
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
    agent = await _agent(client, tmp_path, "opens-slowly")
    first = await agent.session(work)  # type: ignore[attr-defined]
    assert (await first.asend("opens")).stop_reason == "end_turn"  # the agent is up
    stuck = await agent.session(work)  # type: ignore[attr-defined]
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
