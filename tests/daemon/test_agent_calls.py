"""A request to an agent ends at its deadline or at the agent's exit, whichever comes first; a
prompt past its deadline is cancelled at the agent, whose answer is waited for a grace period.

Driven at `AgentProcess` itself, with a real agent process (`scripted_agent.py`): a small script
speaking ACP over its stdio that answers `initialize`, then says nothing to `session/new` or exits
on it, or works on a prompt until told to stop (then answers, or errs, or goes on), or refuses a
session, or answers a request of the SDK's while a prompt waits. Session setup waits two minutes in
the daemon; the test shortens that deadline in this process, which a daemon started as a process
of its own cannot be told. The daemon's side of the agent's calls (`host`) is a stand-in: this
agent makes none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
from scripted_agent import scripted_agent

from sessiond.daemon.acp_backend import AgentProcess
from sessiond.daemon.agent_types import AgentExited, AgentRequestFailed, PromptOverdue


class Host:
    """The daemon's side of the agent: its environment, and nobody watching; the agent calls
    nothing back."""

    def child_environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        return dict(extra)

    def watched(self) -> bool:
        return False  # no client waits for this agent's updates

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the agent called back the daemon ({name}); this one never should")


@pytest.fixture
async def agent(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AgentProcess]:
    process = AgentProcess(
        "scripted",
        scripted_agent(tmp_path, request.param),
        {},
        tmp_path / "agent.log",
        Host(),  # type: ignore[arg-type]
        "test",
    )
    await asyncio.wait_for(process.start(), 30)
    try:
        yield process
    finally:
        await process.stop()


@pytest.mark.parametrize("agent", ["hang"], indirect=True)
async def test_a_request_the_agent_never_answers_ends_at_its_deadline(
    agent: AgentProcess, tmp_path: Path
) -> None:
    agent.session_timeout = 0.5  # (the agent option session_timeout; two minutes by default)
    with pytest.raises(TimeoutError, match=r"agent 'scripted' did not answer session/new within 0.5 s"):
        await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)
    assert agent.alive  # a late answer is the agent's slowness, not its end
    # The next request is sent and waited for in the same way.
    with pytest.raises(TimeoutError, match="did not answer session/new"):
        await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)


@pytest.mark.parametrize("agent", ["exit"], indirect=True)
async def test_a_request_ends_when_the_agent_exits_long_before_its_deadline(
    agent: AgentProcess, tmp_path: Path
) -> None:
    with pytest.raises(AgentExited, match="exit") as exited:
        await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)  # its deadline: two minutes
    assert "session/new" in str(exited.value)
    assert not agent.alive
    # A request after the exit is not sent: it fails at once, saying why.
    with pytest.raises(AgentExited, match="session/new"):
        await asyncio.wait_for(agent.new_session(str(tmp_path)), 5)


@pytest.mark.parametrize("agent", ["answers"], indirect=True)
async def test_a_prompt_answered_before_its_deadline_is_its_answer(
    agent: AgentProcess, tmp_path: Path
) -> None:
    session_id, _ = await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)
    outcome = await asyncio.wait_for(agent.prompt(session_id, "work", timeout=60, grace=60), 30)
    assert (outcome.stop_reason, outcome.usage) == ("end_turn", None)


@pytest.mark.parametrize(
    ("agent", "grace"),
    [
        # The agent answers once told to stop: the call ends then, long before its grace is out
        # (which wait_for would report as a TimeoutError instead).
        ("obeys", 120.0),
        # It stops, and answers the prompt with an error: still the deadline's doing.
        ("errs", 120.0),
        # It goes on: the call is let go once its grace is out.
        ("ignores", 0.3),
    ],
    indirect=["agent"],
)
async def test_a_prompt_past_its_deadline_is_cancelled_at_the_agent_and_ends_overdue(
    agent: AgentProcess, grace: float, tmp_path: Path
) -> None:
    session_id, _ = await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)
    with pytest.raises(PromptOverdue):
        await asyncio.wait_for(agent.prompt(session_id, "work", timeout=0.3, grace=grace), 30)
    assert agent.alive


@pytest.mark.parametrize("agent", ["refuses"], indirect=True)
async def test_a_request_the_agent_refuses_fails_with_its_code_message_and_data(
    agent: AgentProcess, tmp_path: Path
) -> None:
    with pytest.raises(AgentRequestFailed, match="no such folder") as refused:
        await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)
    assert (refused.value.code, refused.value.data) == (-32602, {"cwd": str(tmp_path)})
    assert agent.alive


@pytest.mark.parametrize("agent", ["talks"], indirect=True)
async def test_the_sdks_requests_are_answered_while_a_prompt_waits_and_each_answer_reaches_its_asker(
    agent: AgentProcess, tmp_path: Path
) -> None:
    """A turn's prompt is written and answered past the SDK, whose own requests share the pipe:
    the agent answers one of the SDK's, an id nobody asked, and the prompt, in one write."""
    session_id, _ = await asyncio.wait_for(agent.new_session(str(tmp_path)), 30)
    prompt = asyncio.ensure_future(agent.prompt(session_id, "work", timeout=60))
    await asyncio.sleep(0)  # (the prompt is written before the request below)
    await asyncio.wait_for(agent.set_mode(session_id, "plan"), 30)
    outcome = await asyncio.wait_for(prompt, 30)
    assert outcome.stop_reason == "end_turn"  # not the stray answer's "refusal"
    assert agent.alive
