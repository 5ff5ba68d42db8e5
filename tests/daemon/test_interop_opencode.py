"""Interoperability with opencode (npm opencode-ai, `opencode acp`) against the Anthropic stand-in.

opencode-ai ships its native binary in an optional dependency
(opencode-linux-x64), so it installs from the registry alone. It is pointed
at a model API by its config: `OPENCODE_CONFIG_CONTENT` here declares a
provider "standin" using the AI SDK's Anthropic client (`npm:
@ai-sdk/anthropic`, bundled) with `options.baseURL` at the stand-in, and
makes its model the default. `OPENCODE_DISABLE_MODELS_FETCH` and friends keep
it off the network; XDG dirs under tmp keep its database private. Its tools
(write, edit, bash, todowrite) run in its own process without asking (its
default permissions allow them; `"permission": {"bash": "ask"}` in its config
asks the client); it reports `usage_update` with a cost. Its commands run in
the session's root (a worktree's), never through ACP terminals: a sandbox does
not confine them. It sends no `plan` for its todos. It fails a 401 at once and
retries a 5xx or an unreachable API five times over ~80-110 s, with no setting
to stop it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AsyncAgent, AsyncDaemon
from tests.daemon.interop_checks import (
    StillRunning,
    allow_then_reject,
    fails_fast,
    git_repo,
    kill_mid_turn,
    landed_in_its_worktree,
    leave_mid_stream,
    module_daemon,
    shows_changed,
    unreachable_url,
)
from tests.daemon.test_interop_claude import eventually
from tests.standins.anthropic import AnthropicStandIn, Reply, Text

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "opencode"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon(AGENT)


@pytest.fixture(scope="module")
def _standin_server() -> Iterator[AnthropicStandIn]:
    running = AnthropicStandIn().start()
    yield running
    running.stop()


@pytest.fixture
def standin(_standin_server: AnthropicStandIn) -> AnthropicStandIn:
    """The module's stand-in, its script, records and failure fresh for each test."""
    with _standin_server.lock:
        _standin_server.script.clear()
        _standin_server.requests.clear()
        _standin_server.failing = None
    return _standin_server


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
    # Its two messages, sent with nothing between them, are paragraphs.
    assert reply.text == "Writing the notes.\n\nAll done: the notes say hello world."
    assert len(chunks) > 2
    assert notes.read_text() == "hello world\n"
    assert (work / "where.txt").read_text().strip() == str(work)
    # Each tool call's line says what it did: opencode names a call by its tool ("write", "bash")
    # until it runs, then by its file or command. From memory and from the store alike.
    for transcript in (await session.atranscript(limit=50), await session.atranscript(offset=0)):
        tools = [line.text for line in transcript.lines if line.role == "tool"]
        assert [re.sub(r"\] .*/", "] …/", text) for text in tools] == [
            "[edit] …/notes.txt",
            "[edit] …/notes.txt",
            "[execute] pwd > where.txt",
        ], tools
    main = standin.main_requests()
    assert len(main) == 4
    assert len(main[-1].tool_results()) == 3  # each tool's result went back to the model

    last: list[str] = ["nothing yet"]

    async def settled() -> bool:
        info = await session.aget()
        paths = {f.path for f in info.changes.files} if info.changes else set()
        last[0] = f"changed files {sorted(paths)}, context {info.context}"
        return {"notes.txt", "where.txt"} <= paths and info.context is not None

    await eventually(
        settled, what="the changed files (notes.txt, where.txt) and the context fill", seen=lambda: last[0]
    )
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


@pytest.mark.timeout(300)  # opencode starts in ~5 s, ~20 s on a fresh database
async def test_opencode_asks_before_a_command_and_the_answer_reaches_it(
    client: AsyncDaemon, standin: AnthropicStandIn, work: Path, tmp_path: Path
) -> None:
    env = standin.opencode_env(tmp_path / "home", permission={"bash": "ask"})
    agent = await client.agent("opencode-asks", command=[str(AGENT), "acp"], env=env)  # policy: ask
    session = await agent.session(work)
    standin.push(
        Reply.tool("bash", {"command": "echo yes > allowed.txt", "description": "the first"}),
        Reply.text("Ran it."),
        Reply.tool("bash", {"command": "echo no > denied.txt", "description": "the second"}),
    )
    # A fresh opencode (its database made first) takes ~20 s to its first model call.
    await allow_then_reject(client, session, "echo", timeout=120)
    assert (work / "allowed.txt").read_text() == "yes\n"
    assert not (work / "denied.txt").exists()
    # The allowed command's output went back to the model; after the refusal opencode stops the
    # turn without asking the model again (its session loop ends on a rejected permission).
    main = standin.main_requests()
    assert len(main) == 3
    assert len(main[1].tool_results()) == 1
    await agent.aremove()


async def test_opencode_s_todos_reach_no_plan(
    opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    """opencode 1.18.33's todowrite runs (its result goes back to the model) but sends no ACP `plan`:
    its ACP side reports every tool, todowrite too, as `tool_call` / `tool_call_update` only
    (`handleToolPart`), and the `sessionUpdate`s its binary sends are agent_message_chunk,
    agent_thought_chunk, tool_call, tool_call_update, usage_update, available_commands_update and
    config_option_update (`plan` is only in its copy of the schema). So the session's plan stays empty."""
    session = await opencode.session(work)
    todos = [
        {"content": "Write the notes", "status": "in_progress", "priority": "high"},
        {"content": "Check them", "status": "pending", "priority": "medium"},
    ]
    standin.push(Reply.tool("todowrite", {"todos": todos}), Reply.text("Planned."))
    assert (await session.asend("plan the work")).text.endswith("Planned.")
    (answered,) = standin.main_requests()[-1].tool_results()
    assert "Write the notes" in json.dumps(answered)
    assert answered.get("is_error") is not True
    assert (await session.aget()).plan is None


@pytest.mark.timeout(300)  # opencode starts in ~5 s, ~20 s on a fresh database
async def test_opencode_runs_commands_itself_in_a_worktree_and_unconfined_in_a_sandbox(
    client: AsyncDaemon, opencode: AsyncAgent, standin: AnthropicStandIn, tmp_path: Path
) -> None:
    """Its bash tool runs in opencode's own process (it never asks for an ACP terminal), in the
    session's root: a worktree session's commands land in its worktree; a sandbox session's are not
    in the daemon's bubblewrap, so a file outside the root is written once opencode's own rule for
    folders outside the root has asked the client."""
    repo = git_repo(tmp_path / "repo")
    session = await opencode.session(repo, placement="worktree")
    standin.push(
        Reply.tool("bash", {"command": "pwd > where.txt", "description": "where we are"}),
        Reply.text("Ran it."),
    )
    assert (await session.asend("where are we?")).text.endswith("Ran it.")
    await landed_in_its_worktree(session, repo)

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "boxed"
    root.mkdir()
    boxed = await opencode.session(root, placement="sandbox")
    command = f"pwd > where.txt && touch {outside}/escaped.txt"
    standin.push(Reply.tool("bash", {"command": command, "description": "escape"}), Reply.text("Ran it."))
    async with client.events(sessions=[boxed.id], kinds=["permission.asked"]) as events:
        turn = asyncio.create_task(boxed.asend("where are we?"))
        # opencode asks before a command reaches a folder outside the session's root (its own
        # `external_directory` rule, "ask" by default); allowed, the command runs unconfined.
        asked = await next_matching(events, kind("permission.asked"), timeout=60)
        assert str(outside) in str(asked.data["toolCall"])
        option = next(o["optionId"] for o in asked.data["options"] if o["kind"] == "allow_once")
        assert await client.answer_permission(asked.data["permission"], option)
        assert (await turn).text.endswith("Ran it.")
    assert (root / "where.txt").read_text().strip() == str(root)
    assert (outside / "escaped.txt").exists()  # not confined
    await shows_changed(session, "where.txt")
    await shows_changed(boxed, "where.txt")


async def test_opencode_fails_a_refused_key_fast_saying_what_to_do(
    opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    session = await opencode.session(work)
    standin.push("Fine.")
    assert (await session.asend("warm up")).text.endswith("Fine.")
    standin.fail_with(401)
    message = await fails_fast(session, "say hello")
    assert "the stand-in answers 401" in message  # the API's words, as opencode passes them on
    assert "its log says" not in message  # its log has only pieces of the same error
    assert "check the API key in its env" in message
    standin.fail_with(None)
    standin.push("Back.")
    assert (await session.asend("and now?")).text.endswith("Back.")


RETRIES = (
    "opencode 1.18.33 retries a 5xx or an unreachable API 5 times, 2 s doubling to 30 s apart "
    "(~80 s for a 500, ~110 s with no API, measured here), and nothing sets that: no config key or "
    "env var (its SessionRetry policy, RETRY_MAX_RETRIES = 5), only a retry-after header of the "
    "API's; its ACP side sends nothing while it waits (session.retry.scheduled stays inside)"
)


@pytest.mark.xfail(strict=True, raises=StillRunning, reason=RETRIES)
async def test_opencode_fails_a_broken_api_fast(
    opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    session = await opencode.session(work)
    standin.fail_with(500)
    message = await fails_fast(session, "say hello")
    assert "failing on its side" in message


@pytest.mark.xfail(strict=True, raises=StillRunning, reason=RETRIES)
async def test_opencode_fails_an_unreachable_api_fast(
    client: AsyncDaemon, standin: AnthropicStandIn, work: Path, tmp_path: Path
) -> None:
    env = standin.opencode_env(tmp_path / "home", base_url=unreachable_url())
    agent = await client.agent("opencode-gone", command=[str(AGENT), "acp"], env=env)
    try:
        message = await fails_fast(await agent.session(work), "say hello")
        assert "could not reach its model API" in message
    finally:
        await agent.aremove()


@pytest.mark.timeout(300)  # opencode starts in ~5 s, ~20 s on a fresh database
async def test_opencode_s_sessiond_tools_act_for_the_session_that_called_them(
    client: AsyncDaemon, opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    """opencode keeps one MCP server by each name for all its sessions in a folder (`mcp.add` by
    directory and name), the one offered last: a task suggested from the first session was the
    second's. The daemon takes a call on that server for the session of those that is working."""
    first, second = await opencode.session(work), await opencode.session(work)
    for session in (first, second):  # each open at opencode, the second offered its server last
        standin.push(Reply.text("Open."))
        assert (await session.asend("hello")).text == "Open."
    standin.push(
        Reply.tool("sessiond_suggest_task", {"title": "Tidy the notes", "prompt": "tidy notes.txt"}),
        Reply.text("Suggested."),
    )
    assert (await first.asend("suggest a task")).text == "Suggested."
    (task,) = [t for t in await client.tasks() if t.title == "Tidy the notes"]
    assert task.from_session == first.id


@pytest.mark.timeout(300)  # opencode starts in ~5 s, ~20 s on a fresh database
async def test_an_opencode_side_chat_that_may_not_write_opens_in_plan(
    opencode: AsyncAgent, standin: AnthropicStandIn, work: Path
) -> None:
    """opencode writes files in its own process, unasked: a side chat that may not write opens in
    its `plan` mode (a config option of category mode), where it writes nothing."""
    main = await opencode.session(work)
    standin.push(Reply.text("Main here.", output_tokens=3000))  # (dearer than the side chat's calls)
    assert (await main.asend("hello")).text.endswith("Main here.")
    made = work / "side_wrote.txt"
    standin.push(Reply.tool("write", {"filePath": str(made), "content": "no\n"}), Reply.text("Done."))
    side = await main.aside("please write a file")
    assert side.reply is not None
    # Its answer alone: what opencode replays of the main session as it forks is not part of it.
    assert side.reply.text == "Done."
    # Its cost is its own: opencode's fork reports the main session's cost copied with it.
    main_fill, side_fill = [(await s.aget()).context for s in (main, side)]
    assert main_fill is not None
    assert main_fill.cost is not None
    assert side_fill is not None
    assert side_fill.cost is not None
    assert 0 < side_fill.cost.amount < main_fill.cost.amount, (side_fill, main_fill)
    assert "Main here." not in "\n".join(line.text for line in (await side.atranscript()).lines)
    assert not made.exists()
    controls = await side.acontrols()
    mode_options = [o for o in controls.config_options if o.get("category") == "mode"]
    assert [o.get("currentValue") for o in mode_options] == ["plan"]
