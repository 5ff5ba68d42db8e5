"""What an agent replays of a session it restores (session/load) is its history, not the turn's:
gemini-cli streams it after it has answered the load, so it came in as the next turn's answer
("old answeranswer 1"), with its old tool calls. The daemon hears it as history until it stops.

A real daemon and the Python client; the agent is `scripted_agent.py` in "replays-after-load",
which does what gemini-cli does, in one write after the answer. (With gemini-cli itself a load
is not reliably had: 0.61 clobbers the session's file as it starts to load it when that is within
the minute the session began, and looks only in the folder its process started in; see
docs/agents.md.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_agent import scripted_agent

from sessiond.client import AsyncDaemon
from sessiond.protocol.methods import AGENT_UPDATE
from sessiond.protocol.models import AgentInfo

pytestmark = pytest.mark.timeout(120)


async def test_what_an_agent_replays_after_answering_a_load_is_not_the_turn_s_answer(
    client: AsyncDaemon, tmp_path: Path, work: Path
) -> None:
    agent = await client.agent("replays", command=scripted_agent(tmp_path, "replays-after-load"))
    session = await agent.session(work)
    assert (await session.asend("first")).text == "answer 1"
    await client._call(AGENT_UPDATE, AgentInfo, name=agent.name, restart=True)  # its next turn loads
    reply = await session.asend("second")
    assert reply.text == "answer 1"  # (the new process's first prompt)
    info = await session.aget()
    lines = [line.text for line in (await session.atranscript()).lines]
    assert "old answer" not in lines
    assert not any("WriteFile" in line for line in lines), lines
    assert info.turns == 2
    assert (await agent.aget()).process.starts == 2
