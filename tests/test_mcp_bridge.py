"""The `sessiond` MCP tools: the stdio bridge (`python -m sessiond.client.mcp_bridge`), its tools
and how it acts for one session; the daemon's own http endpoint; and, end to end, demo-agent
sessions that suggest a task and start threads through each of them.

The bridge always runs as a real subprocess driven by the `mcp` SDK's own stdio client, the way
an agent starts it. Its daemon is a small stand-in (`FakeSessiond`) where the test needs to see
exactly what the bridge sent, and a real daemon for the end-to-end tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from demo_agent_client import FakeSessiond
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

from bench.harness import Daemon
from sessiond.client import aconnect
from sessiond.client.mcp_bridge import SESSION_ENV, SOCKET_ENV, TOKEN_ENV

pytestmark = pytest.mark.timeout(120)

BRIDGE_MODULE = "sessiond.client.mcp_bridge"
TOOLS = ("suggest_task", "start_thread", "thread_status", "wait_threads")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a unix socket's path must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="sd-mcp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@asynccontextmanager
async def bridge(env: dict[str, str]) -> AsyncIterator[Client]:
    """The bridge as a child process, connected through the SDK's stdio client (initialize handshake)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", BRIDGE_MODULE], env=env)
    async with Client(params, mode="legacy") as client:
        yield client


async def _first(events: AsyncIterator[Any], count: int) -> AsyncIterator[Any]:
    seen = 0
    async for event in events:
        yield event
        seen += 1
        if seen == count:
            return


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def json_of(result: CallToolResult) -> Any:
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


# --- the tools and their schemas ---------------------------------------------------------------


async def test_lists_the_four_tools_with_their_schemas(short_dir: Path) -> None:
    # Listing needs no daemon: the bridge connects on the first tool call.
    env = {SOCKET_ENV: str(short_dir / "none.sock"), SESSION_ENV: "s1", TOKEN_ENV: "t"}
    async with bridge(env) as client:
        assert client.server_info is not None
        assert client.server_info.name == "sessiond"
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert tuple(tools) == TOOLS
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.output_schema is None  # the result is JSON text
    schemas = {name: tool.input_schema for name, tool in tools.items()}

    placement = {"here", "worktree", "sandbox", "container", "ssh"}
    suggest = schemas["suggest_task"]
    assert suggest["required"] == ["title", "prompt"]
    assert set(suggest["properties"]) == {"title", "prompt", "why", "placement"}
    assert suggest["properties"]["title"]["minLength"] == 1
    assert suggest["properties"]["title"]["maxLength"] == 300
    assert suggest["properties"]["prompt"]["minLength"] == 1
    assert set(suggest["properties"]["placement"]["anyOf"][0]["enum"]) == placement

    start = schemas["start_thread"]
    assert start["required"] == ["prompt"]
    assert set(start["properties"]) == {"prompt", "placement", "title"}
    assert set(start["properties"]["placement"]["anyOf"][0]["enum"]) == placement

    status = schemas["thread_status"]
    assert status["required"] == ["id"]
    assert status["properties"]["id"]["type"] == "string"

    wait = schemas["wait_threads"]
    assert wait["required"] == ["ids"]
    assert wait["properties"]["ids"]["type"] == "array"
    assert wait["properties"]["ids"]["items"] == {"type": "string"}
    assert wait["properties"]["ids"]["minItems"] == 1
    assert wait["properties"]["timeout"]["anyOf"][0] == {"type": "number", "exclusiveMinimum": 0}


async def test_the_tools_call_the_daemon_for_their_session(short_dir: Path) -> None:
    async with FakeSessiond(short_dir / "d.sock") as daemon, bridge(daemon.env) as client:
        suggested = json_of(
            await client.call_tool(
                "suggest_task",
                {"title": "Fix the flaky test", "prompt": "make tests pass", "why": "it failed twice"},
            )
        )
        started = json_of(
            await client.call_tool("start_thread", {"prompt": "say hello", "placement": "worktree"})
        )
        status = json_of(await client.call_tool("thread_status", {"id": started["thread"]}))
        waited = json_of(await client.call_tool("wait_threads", {"ids": [started["thread"]], "timeout": 5}))

    assert suggested == {
        "task": "task-1",
        "status": "suggested",
        "title": "Fix the flaky test",
        "agent": "demo",
    }
    assert started == {"thread": "thread-1", "status": "queued", "placement": "worktree", "root": "/tmp"}
    report = {
        "thread": "thread-1",
        "status": "idle",
        "done": True,
        "reply": "report of say hello\nsecond line",
    }
    assert status == report
    assert waited == {"threads": [report]}

    # One connection, introduced by the session's token; every call on behalf of that session.
    assert daemon.connections == 1
    (initialize,) = daemon.params_of("initialize")
    assert initialize["initializationOptions"]["sessionToken"] == daemon.token
    assert daemon.params_of("task/suggest") == [
        {
            "title": "Fix the flaky test",
            "prompt": "make tests pass",
            "why": "it failed twice",
            "fromSession": daemon.session,
        }
    ]
    assert daemon.params_of("thread/start") == [
        {"parent": daemon.session, "prompt": "say hello", "placement": "worktree"}
    ]
    assert daemon.params_of("thread/status") == [{"thread": "thread-1"}]
    assert daemon.params_of("thread/wait") == [{"threads": ["thread-1"], "timeout": 5.0}]
    # The bridge said goodbye when its stdin closed.
    assert daemon.methods()[-2:] == ["shutdown", "exit"]


async def test_daemon_errors_are_tool_errors_with_the_daemon_message_verbatim(short_dir: Path) -> None:
    async with FakeSessiond(short_dir / "d.sock") as daemon, bridge(daemon.env) as client:
        refused = await client.call_tool("start_thread", {"prompt": "an unknown parent"})
        missing = await client.call_tool("thread_status", {"id": "thread-9"})
        fine = await client.call_tool("suggest_task", {"title": "t", "prompt": "p"})
    assert refused.is_error
    assert text_of(refused) == "no session 'nope': it was never opened"
    assert missing.is_error
    assert text_of(missing) == "no thread 'thread-9'"
    assert not fine.is_error  # an error answer leaves the connection usable


async def test_a_token_the_daemon_refuses_is_a_tool_error(short_dir: Path) -> None:
    async with FakeSessiond(short_dir / "d.sock") as daemon:
        env = {**daemon.env, TOKEN_ENV: "not-the-token"}
        async with bridge(env) as client:
            result = await client.call_tool("suggest_task", {"title": "t", "prompt": "p"})
        assert result.is_error
        assert text_of(result) == "this session token belongs to no session"
        assert "task/suggest" not in daemon.methods()


async def test_no_daemon_is_a_tool_error_not_a_crash(short_dir: Path) -> None:
    socket = short_dir / "nobody.sock"
    env = {SOCKET_ENV: str(socket), SESSION_ENV: "s1", TOKEN_ENV: "t"}
    async with bridge(env) as client:
        result = await client.call_tool("wait_threads", {"ids": ["x"]})
        assert result.is_error
        assert text_of(result).startswith("cannot reach the sessiond daemon")
        assert str(socket) in text_of(result)
        # Still serving.
        assert len((await client.list_tools()).tools) == 4


async def test_the_bridge_connects_again_after_losing_the_daemon(short_dir: Path) -> None:
    async with FakeSessiond(short_dir / "d.sock") as daemon, bridge(daemon.env) as client:
        first = await client.call_tool("suggest_task", {"title": "one", "prompt": "p"})
        await daemon.drop_connections()
        # The bridge notices the loss (at the latest on its next request) and opens a new connection.
        second = await client.call_tool("suggest_task", {"title": "two", "prompt": "p"})
        if second.is_error:  # the loss was seen by this very call: the next one connects again
            assert "lost the connection" in text_of(second)
            second = await client.call_tool("suggest_task", {"title": "two", "prompt": "p"})
    assert not first.is_error
    assert json_of(second)["title"] == "two"
    assert daemon.connections == 2


def test_the_bridge_refuses_to_start_without_its_environment() -> None:
    env = {key: value for key, value in os.environ.items() if key not in (SOCKET_ENV, SESSION_ENV, TOKEN_ENV)}
    done = subprocess.run(
        [sys.executable, "-m", BRIDGE_MODULE],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"{SOCKET_ENV}, {SESSION_ENV}, {TOKEN_ENV}" in done.stderr


# --- end to end: a real daemon, the demo agent, the bridge the daemon offers it ------------------


@pytest.fixture
def real_daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    code = running.stop()
    print("\n".join(["--- daemon stderr", *running.stderr]))
    assert code == 0, f"the daemon exited with {code}"
    shutil.rmtree(running.home, ignore_errors=True)


async def test_an_agent_suggestion_reaches_the_inbox(real_daemon: Daemon, work: Path) -> None:
    async with aconnect(real_daemon.socket, start=False) as daemon:
        session = await (await daemon.agent("demo")).session(work)
        reply = await session.asend("suggest Fix the flaky test | make tests pass | it failed twice")
        assert reply.text.startswith("Suggested task "), reply.text
        task_id = reply.text.removeprefix("Suggested task ").split(":", 1)[0]

        listing = await daemon._connection.request("task/list", {})
    (task,) = [task for task in listing["tasks"] if task["id"] == task_id]
    assert task["title"] == "Fix the flaky test"
    assert task["prompt"] == "make tests pass"
    assert task["why"] == "it failed twice"
    assert task["fromSession"] == session.id
    assert task["status"] == "suggested"


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_a_thread_started_by_an_agent_reports_back(
    real_daemon: Daemon, work: Path, transport: str
) -> None:
    async with aconnect(real_daemon.socket, start=False) as daemon:
        demo = await daemon.agent("demo")
        # An agent that takes http MCP servers is offered the daemon's endpoint; one that does not,
        # the stdio bridge.
        agent = (
            demo
            if transport == "http"
            else await daemon.agent("nohttp", command=[*demo.info.command, "--no-mcp-http"])
        )
        session = await agent.session(work)
        started = await session.asend("thread say hello")
        assert started.text.startswith("Started thread "), started.text
        thread = started.text.removeprefix("Started thread ").strip()

        waited = await session.asend("wait")
        capabilities = (await agent.aget()).process.capabilities
        status = await daemon.status()
    assert waited.text == f"{thread} idle: hello"
    assert capabilities is not None
    assert capabilities.mcp_http is (transport == "http")
    assert (status.mcp_url is not None) is (transport == "http")


async def test_a_coordinator_on_a_one_turn_agent_lends_its_slot_to_the_threads_it_waits_for(
    real_daemon: Daemon, work: Path
) -> None:
    async with aconnect(real_daemon.socket, start=False) as daemon:
        agent = await daemon.agent(
            "single", command=(await daemon.agent("demo")).info.command, max_active_turns=1
        )
        session = await agent.session(work)
        # One turn: start a thread, then wait for it. The thread needs the agent's only slot,
        # which the waiting turn holds; without lending it the wait would end at its timeout.
        reply = await session.asend("thread say hello\nwait 60\nsay back in my turn")
        other = await agent.session(work)
        after = await other.asend("say the slot came back")
    lines = reply.text.splitlines()
    assert lines[0].startswith("Started thread "), reply.text
    thread = lines[0].removeprefix("Started thread ").strip()
    assert f"{thread} idle: hello" in reply.text
    assert lines[-1] == "back in my turn"
    assert after.text == "the slot came back"


async def test_the_endpoint_refuses_a_request_without_a_session_token(
    real_daemon: Daemon, work: Path
) -> None:
    async with aconnect(real_daemon.socket, start=False) as daemon:
        await (await (await daemon.agent("demo")).session(work)).asend("say up")
        url = (await daemon.status()).mcp_url
    assert url is not None
    assert url.startswith("http://127.0.0.1:")
    forged = "s1." + "0" * 64
    for headers in ({}, {"Authorization": f"Bearer {forged}"}):
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        async with Client(transport, mode="legacy") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == set(TOOLS)
            refused = await client.call_tool("suggest_task", {"title": "t", "prompt": "p"})
        assert refused.is_error
        assert "carries no valid sessiond session token" in text_of(refused)


async def test_a_cancelled_wait_leaves_the_slot_it_lent_to_the_agent(real_daemon: Daemon, work: Path) -> None:
    async with aconnect(real_daemon.socket, start=False) as daemon:
        demo = await daemon.agent("demo")
        agent = await daemon.agent("single", command=demo.info.command, max_active_turns=1)
        coordinator = await agent.session(work)
        async with daemon.events(kinds=["turn.started"]) as events, asyncio.timeout(60):
            turn = asyncio.create_task(coordinator.asend("thread hang\nwait"))
            started = [event.session async for event in _first(events, 2)]
        # The coordinator's turn, then its thread's, in the slot the waiting turn lent it.
        assert started[0] == coordinator.id
        assert started[1] != coordinator.id
        thread = started[1]
        await coordinator.acancel()
        assert (await turn).stop_reason == "cancelled"
        await (await daemon.session(thread)).acancel()
        # The agent's one slot is free again: neither the cancelled wait nor the thread keeps it.
        other = await agent.session(work)
        reply = await asyncio.wait_for(other.asend("say the slot is free"), 60)
    assert reply.text == "the slot is free"


async def test_the_endpoint_starts_again_when_its_server_stops_on_its_own() -> None:
    from types import SimpleNamespace

    from sessiond.daemon.mcp_http import McpEndpoint

    # The endpoint alone, before any session: stand-in tools, and tokens that match no session.
    endpoint = McpEndpoint(SimpleNamespace(), lambda token: None)  # type: ignore[arg-type]
    await endpoint.url()
    task = endpoint._task
    assert task is not None
    task.cancel()  # stands in for the server failing: it ends without being asked to
    with pytest.raises(asyncio.CancelledError):
        await task
    assert endpoint.started_url is None
    second = await endpoint.url()  # a new server, which answers
    async with Client(streamable_http_client(second), mode="legacy") as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == set(TOOLS)
    await endpoint.close()
