"""Interoperability with a real ACP agent from npm: claude-agent-acp (and the Claude Code it drives).

With no key its `session/new` still succeeds and the prompt ends at once with
"Authentication required": enough to prove the daemon speaks ACP with a real
agent, and that one agent's failure leaves the others running.

Pointed at a stand-in of the Anthropic Messages API (tests/standins/anthropic.py)
it does whole turns offline: the model's replies are scripted per test, the
agent carries out the tools they ask for (Write, Edit, Bash, TodoWrite) and
sends their results back, and the stand-in records what it received.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from events import next_matching

from bench.harness import Daemon
from sessiond.client import AgentError, AsyncAgent, AsyncDaemon, aconnect
from tests.daemon.interop_checks import (
    allow_then_reject,
    git_repo,
    kill_mid_turn,
    landed_in_its_worktree,
    leave_mid_stream,
    module_daemon,
    shows_changed,
)
from tests.standins.anthropic import AnthropicStandIn, Reply, Text
from tests.terminal import Tmux, bottom, row_of

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "claude-agent-acp"


@pytest.fixture
def claude_command() -> list[str]:
    if shutil.which("node") is None or not AGENT.exists():
        pytest.fail(f"{AGENT} is missing: `./dev test` installs it (npm ci --prefix tests/interop)")
    return [str(AGENT)]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon()


@pytest.fixture(scope="module")
def _standin_server() -> Iterator[AnthropicStandIn]:
    standin = AnthropicStandIn().start()
    yield standin
    standin.stop()


@pytest.fixture
def standin(_standin_server: AnthropicStandIn) -> AnthropicStandIn:
    """The module's stand-in, its script and records fresh for each test."""
    with _standin_server.lock:
        _standin_server.script.clear()
        _standin_server.requests.clear()
    return _standin_server


MakeAgent = Callable[..., Awaitable[AsyncAgent]]
# What Claude Code counts for one of the stand-in's replies (120 input and 30 output tokens at its
# default model's prices), in USD.
ONE_REPLY = 0.00081


@pytest.fixture
async def claude(
    client: AsyncDaemon,
    standin: AnthropicStandIn,
    claude_command: list[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> AsyncIterator[MakeAgent]:
    """Makes this test's claude-agent-acp, talking to the stand-in, its Claude Code settings and
    sessions under tmp_path; removed (its process stopped) when the test ends."""
    made: list[AsyncAgent] = []

    async def make(**options: Any) -> AsyncAgent:
        home = tmp_path / "claude"
        home.mkdir(exist_ok=True)
        env = {**standin.env(), "CLAUDE_CONFIG_DIR": str(home)}
        name = f"claude-{len(made)}-{request.node.name[5:30]}".replace("_", "-")
        made.append(await client.agent(name, command=claude_command, env=env, **options))
        return made[-1]

    yield make
    for agent in made:
        await agent.aremove()


async def eventually(
    check: Callable[[], Awaitable[bool]],
    timeout: float = 30,
    what: str = "",
    seen: Callable[[], str] | None = None,
) -> None:
    """State events are throttled: poll until `check` holds. `seen` says, on a failure, what the
    last check found."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            found = f"; the last check found {seen()}" if seen is not None else ""
            raise AssertionError(f"not within {timeout} s: {what}{found}")
        await asyncio.sleep(0.05)


async def test_a_real_agent_opens_its_session_and_fails_the_turn_clearly(
    client: AsyncDaemon, work: Path, claude_command: list[str]
) -> None:
    # As root it refuses to run without IS_SANDBOX; no key, so it cannot call a model.
    claude = await client.agent(
        "claude-no-key", command=claude_command, env={"IS_SANDBOX": "1", "ANTHROPIC_API_KEY": ""}
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
    await claude.aremove()


async def test_a_whole_turn_streams_plans_writes_edits_and_runs_at_the_placement(
    client: AsyncDaemon, daemon: Daemon, work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    agent = await claude(permission_policy="allow")
    session = await agent.session(work)
    notes = work / "notes.txt"
    standin.push(
        Reply.todos(("Write the notes", "in_progress"), ("Check where we are", "pending")),
        Reply.write(str(notes), "hello\n", say="Writing the notes."),
        Reply.edit(str(notes), "hello", "hello world"),
        Reply.bash("pwd > where.txt"),
        Reply.todos(("Write the notes", "completed"), ("Check where we are", "completed")),
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
    # Its two messages, sent with nothing between them, are paragraphs; the recap is the last.
    assert reply.text == "Writing the notes.\n\nAll done: the notes say hello world."
    info = await session.aget()
    assert info.recap == "All done: the notes say hello world."
    assert info.title == "write the notes, then check where we are"  # opened untitled: its first prompt
    assert len(chunks) > 2  # streamed in pieces, as the stand-in sent them
    assert "".join(chunks) == reply.text

    # Each tool call's transcript line says what it did (the agent names a call by its tool,
    # "Write", "Terminal", until its input has streamed), from memory and from the store alike.
    for transcript in (await session.atranscript(limit=50), await session.atranscript(offset=0)):
        assert [line.text for line in transcript.lines if line.role == "tool"] == [
            "[edit] Write notes.txt",
            "[edit] Edit notes.txt",
            "[execute] pwd > where.txt",
        ]
    # The agent's tools ran for real, at the session's root.
    assert notes.read_text() == "hello world\n"
    assert (work / "where.txt").read_text().strip() == str(work)
    # Each tool's result went back to the model in the next request.
    main = standin.main_requests()
    assert len(main) == 6
    for asked, answered in itertools.pairwise(main):
        assert asked.reply is not None
        tool_ids = {b.id for b in asked.reply.blocks if hasattr(b, "id")}
        assert tool_ids <= {r["tool_use_id"] for r in answered.tool_results()}

    async def settled() -> bool:
        info = await session.aget()
        changed = {f.path for f in info.changes.files} if info.changes else set()
        return bool(info.plan and info.plan.done == 2 and {"notes.txt", "where.txt"} <= changed)

    await eventually(settled, what="the plan and the changed files")
    info = await session.aget()
    assert info.plan is not None
    assert [e.content for e in info.plan.entries] == ["Write the notes", "Check where we are"]
    # Context fill and cost as the agent reported them (the stand-in's usage has the cache fields).
    assert info.context is not None
    assert not info.context.estimated
    assert info.context.size == 200000
    assert info.context.used > 0
    assert info.context.cost is not None
    assert info.context.cost.amount > 0
    reported_cost = info.context.cost.amount

    # A reply whose usage lacks the cache fields: claude-agent-acp 0.23.1 then sends
    # `usage_update` with `"used": null`. The update is read field by field, not dropped:
    # the cost it carries still counts, and the daemon logs it once, without a traceback.
    standin.push(Reply.text("Once more.", cache_fields=False), Reply.text("And again.", cache_fields=False))
    assert (await session.asend("again")).text == "Once more."
    assert (await session.asend("and again")).text == "And again."

    async def cost_grew() -> bool:
        return (await client.fleet()).cost > reported_cost

    await eventually(cost_grew, what="the cost of the turns whose usage had no cache fields")
    info = await session.aget()
    assert info.context is not None
    assert info.context.size == 200000
    process = (await agent.aget()).process
    assert process.malformed_updates >= 2
    logged = [line for line in daemon.stderr if f"agent {agent.name!r} sent a" in line]
    assert len(logged) == 1, logged  # once per agent and kind
    assert "usage_update" in logged[0]
    assert "used" in logged[0]
    assert not any("handling notification method=session/update" in line for line in daemon.stderr)


async def test_claude_runs_commands_itself_in_a_worktree_and_unconfined_in_a_sandbox(
    work: Path, tmp_path: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    """Claude Code runs Bash in its own process (claude-agent-acp 0.23.1 never asks for an ACP
    terminal; its `terminal` content is only a display), in the session's root: a worktree
    session's commands land in its worktree; a sandbox session's are not in the daemon's
    bubblewrap, so a file outside the root is written."""
    agent = await claude(permission_policy="allow")
    repo = git_repo(tmp_path / "repo")
    session = await agent.session(repo, placement="worktree")
    standin.push(Reply.bash("pwd > where.txt"), Reply.text("Ran it."))
    assert (await session.asend("where are we?")).text == "Ran it."
    await landed_in_its_worktree(session, repo)

    outside = tmp_path / "outside"
    outside.mkdir()
    boxed = await agent.session(work, placement="sandbox")
    standin.push(Reply.bash(f"pwd > where.txt && touch {outside}/escaped.txt"), Reply.text("Ran it."))
    assert (await boxed.asend("where are we?")).text == "Ran it."
    assert (work / "where.txt").read_text().strip() == str(work)
    assert (outside / "escaped.txt").exists()  # not confined
    await shows_changed(session, "where.txt")
    await shows_changed(boxed, "where.txt")


async def test_a_permission_reaches_a_client_and_its_answer_reaches_the_agent(
    client: AsyncDaemon, work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    agent = await claude()  # permission policy: ask
    session = await agent.session(work)
    standin.push(
        Reply.bash("echo yes > allowed.txt"),
        Reply.text("Ran it."),
        Reply.bash("echo no > denied.txt"),
        Reply.text("Could not run it."),
    )
    await allow_then_reject(client, session, "echo")
    assert (work / "allowed.txt").read_text() == "yes\n"
    assert not (work / "denied.txt").exists()
    # The refusal went back to the model as the tool's (failed) result.
    refused = standin.main_requests()[3].tool_results()[-1]
    assert refused.get("is_error") is True


async def test_watch_shows_what_claude_asks_and_does_and_answers_it(
    daemon: Daemon, work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    """`sessiond watch` (in a real terminal) over a real agent: the Bash call Claude Code asks
    permission for is the session's last line and the question at the bottom; `a` allows it; the
    command it then runs (until the test lets it end) is what the session does now."""
    agent = await claude()  # permission policy: ask
    session = await agent.session(work)
    go = work / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.1; done; echo ran > ran.txt"
    standin.push(Reply.bash(command), Reply.text("Ran it."))
    tmux = Tmux([sys.executable, "-m", "sessiond.client", "watch", "--agent", agent.name], daemon.env)
    try:
        turn = asyncio.create_task(session.asend("run it"))
        asked = await asyncio.to_thread(tmux.wait_for, lambda s: f"{session.id} asks (" in bottom(s), 60)
        footer = bottom(asked)
        assert footer.startswith(f"{session.id} asks (a allow · A always · r reject): [execute] "), footer
        assert command[:40] in footer, footer  # the question is the command itself
        assert "NEEDS YOU" in row_of(asked, session.id)
        assert "asks: [execute] " in row_of(asked, session.id)
        tmux.keys("a")
        running = await asyncio.to_thread(
            tmux.wait_for,
            lambda s: (
                "working" in row_of(s, session.id) and "[execute] while [ ! -e" in row_of(s, session.id)
            ),
        )
        assert "asks:" not in row_of(running, session.id)  # what it does now, no longer what it asks
        go.touch()
        assert (await asyncio.wait_for(turn, 60)).text == "Ran it."
        await asyncio.to_thread(tmux.wait_for, lambda s: row_of(s, session.id).rstrip().endswith("Ran it."))
        assert (work / "ran.txt").read_text() == "ran\n"
    finally:
        tmux.kill()


async def test_cancel_mid_stream_ends_the_turn_cancelled(
    client: AsyncDaemon, work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    agent = await claude()
    session = await agent.session(work)
    long = " ".join(f"word{i}" for i in range(400))
    standin.push(Reply((Text(long, chunks=400),), delay=0.05), "Still here.", "Here too.")  # ~20 s
    await leave_mid_stream(client, session)

    async def hung_up() -> bool:
        return standin.main_requests()[0].aborted

    await eventually(hung_up, what="the agent hanging up on the model's stream")
    # The session carries on, each prompt answered with its own reply. (claude-agent-acp 0.23.1
    # answers the prompt after a cancel with what is left of the cancelled one, an empty reply,
    # and every later one with the model's answer to the one before: its prompt loop's doing.
    # The daemon closes the session at the agent after a turn that ended badly, and restores it.)
    second = await session.asend("are you there?")
    assert (second.stop_reason, second.text) == ("end_turn", "Still here.")
    third = await session.asend("and now?")
    assert third.text == "Here too."
    texts = "\n".join(standin.main_requests()[-1].texts())
    assert "are you there?" in texts  # the conversation kept
    assert "Still here." in texts


async def test_max_live_sessions_evicts_and_an_evicted_session_comes_back_with_its_history(
    work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    agent = await claude(max_live_sessions=2)
    sessions = await agent.sessions(4, work)
    for index, session in enumerate(sessions):
        standin.push(f"Noted fruit {index}.")
        assert (await session.asend(f"remember the fruit number {index}")).text == f"Noted fruit {index}."
        assert (await agent.aget()).process.live_sessions <= 2
    # Back to each one, the first two long evicted: its next request carries what it said before.
    for index, session in enumerate(sessions):
        standin.push(f"It was fruit {index}.")
        assert (await session.asend("which fruit was it?")).text == f"It was fruit {index}."
        assert (await agent.aget()).process.live_sessions <= 2
        last = standin.main_requests()[-1]
        texts = "\n".join(last.texts())
        assert f"remember the fruit number {index}" in texts
        assert f"Noted fruit {index}." in texts
        others = [i for i in range(4) if i != index]
        assert not any(f"remember the fruit number {i}" in texts for i in others)
    # Each resumed session's cost is its two turns' (the agent counted the second from 0 again).
    first_cost = 0.0

    async def each_cost_adds_up() -> bool:
        nonlocal first_cost
        costs = [(await s.aget()).context for s in sessions]
        amounts = [c.cost.amount if c is not None and c.cost is not None else 0.0 for c in costs]
        first_cost = amounts[0]
        return (
            amounts[0] > 0
            and all(abs(a - amounts[0]) < 1e-9 for a in amounts)
            and first_cost > 1.5 * ONE_REPLY
        )

    await eventually(each_cost_adds_up, what="two turns' cost in each session", seen=lambda: str(first_cost))


async def test_a_closed_session_reopened_goes_on_with_its_conversation(
    work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    """Closed (at the agent too), then reopened: its next turn restores the conversation at
    claude-agent-acp, so the model's next request carries what was said before the close."""
    agent = await claude()
    session = await agent.session(work)
    standin.push("Noted: the plum.")
    assert (await session.asend("remember the plum")).text == "Noted: the plum."
    await session.aclose()
    assert (await agent.aget()).process.live_sessions == 0
    await session.areopen()
    standin.push("It was the plum.")
    reply = await session.asend("which fruit was it?")
    assert reply.text == "It was the plum."
    texts = "\n".join(standin.main_requests()[-1].texts())
    assert "remember the plum" in texts
    assert "Noted: the plum." in texts
    assert (await session.aget()).turns == 2


async def test_killing_the_agent_fails_only_its_running_turn(
    client: AsyncDaemon, work: Path, claude: MakeAgent, standin: AnthropicStandIn
) -> None:
    agent = await claude()
    demo = await client.agent("demo")
    session = await agent.session(work)
    bystander = await demo.session(work)
    standin.push("Warm.", Reply((Text("slow " * 200, chunks=200),), delay=0.05))  # then ~10 s
    assert (await session.asend("warm up")).text == "Warm."

    async def cost() -> float:
        info = await session.aget()
        return info.context.cost.amount if info.context and info.context.cost else 0.0

    before = 0.0

    async def priced() -> bool:
        nonlocal before
        before = await cost()
        return before > 0

    await eventually(priced, what="the warm-up turn's cost")
    other = asyncio.create_task(bystander.asend("hang"))
    await kill_mid_turn(client, agent, session)  # the agent and the Claude Code processes it started
    assert not other.done()
    await bystander.acancel()
    assert (await other).stop_reason == "cancelled"
    # It starts again on the next turn, and the session comes back.
    standin.push("Back.")
    assert (await session.asend("are you back?")).text == "Back."
    assert (await agent.aget()).process.starts == 2

    # The new process counts the session's cost from 0 again: the session's cost adds it on.
    # (Each of the stand-in's replies costs the same: the old count alone would stay at `before`.)
    async def added_up() -> bool:
        return await cost() > before * 1.5

    await eventually(added_up, what="the cost counted before the kill and after it", seen=lambda: str(before))


async def test_a_daemon_with_live_claude_sessions_stops_cleanly(
    standin: AnthropicStandIn, claude_command: list[str], tmp_path: Path, work: Path
) -> None:
    """Each live claude-agent-acp session holds a stream to the daemon's MCP endpoint: the agents
    stop first, so the endpoint closes with none left open (it waited its grace, then cancelled
    each with a traceback), and the agent is not waited on for the end of its input (it ignores it)."""
    own = Daemon().start()
    try:
        async with aconnect(own.socket, start=False) as client:
            env = {**standin.env(), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
            agent = await client.agent("claude-stopped", command=claude_command, env=env)
            for session in await agent.sessions(2, work):
                standin.push("Hi.")
                assert (await session.asend("hello")).text == "Hi."
            assert (await client.stop()).pid == own.pid
        assert own.stop() == 0
    finally:
        own.stop()
        shutil.rmtree(own.home, ignore_errors=True)
    said = "\n".join(own.stderr)
    assert "Traceback" not in said, said
    assert " ERROR " not in said, said


async def test_a_claude_side_chat_that_may_not_write_answers_and_writes_nothing(
    claude: MakeAgent, standin: AnthropicStandIn, work: Path
) -> None:
    """Claude Code asks before a Write in its default mode, and the daemon refuses a side chat that
    may not write: the reply comes, no file is made, and the transcript names the refused call. (In
    its `plan` mode Claude Code wrote the file unasked, as in `acceptEdits`, the agent's mode here:
    the side chat keeps to the default mode.)"""
    agent = await claude(permission_policy="allow", mode="acceptEdits")
    main = await agent.session(work)
    standin.push("Main here.")
    assert (await main.asend("hello")).text == "Main here."
    standin.push(Reply.write(str(work / "side_wrote.txt"), "no\n"), Reply.text("Could not write it."))
    side = await main.aside("please write side_wrote.txt")
    assert side.reply is not None
    assert side.reply.text.endswith("Could not write it.")
    assert not (work / "side_wrote.txt").exists()
    assert (await side.acontrols()).mode == "default"
    transcript = await side.atranscript()
    tools = [line.text for line in transcript.lines if line.role == "tool"]
    assert tools == ["[edit] Write side_wrote.txt (refused)"]
    # A writable one writes.
    standin.push(Reply.write(str(work / "side_may.txt"), "yes\n"), Reply.text("Wrote it."))
    writable = await main.aside("write side_may.txt", writable=True)
    assert writable.reply is not None
    assert writable.reply.text.endswith("Wrote it.")
    assert (work / "side_may.txt").read_text() == "yes\n"


@pytest.mark.timeout(300)  # six Claude Code processes start, four at a time
async def test_claude_is_asked_to_open_four_sessions_at_a_time(
    client: AsyncDaemon, work: Path, claude: MakeAgent
) -> None:
    """claude-agent-acp starts a Claude Code process for each session: 100 asked at once on two
    cores missed the 120 s session_timeout. The daemon asks it four at a time (by the name its
    initialize gives), and the ones that wait show queued, saying so."""
    agent = await claude()
    sessions = await agent.sessions(6, work)
    async with client.events(sessions=[s.id for s in sessions], kinds=["session.status"]) as events:
        replies = await asyncio.wait_for(asyncio.gather(*(s.asend("hello") for s in sessions)), 240)
        waited = await next_matching(events, lambda e: e.data.get("status") == "queued", timeout=30)
    assert [reply.text for reply in replies] == ["done"] * 6  # (the stand-in's answer by default)
    assert waited.data["detail"] == (
        f"opening at agent {agent.name!r}, which is asked to open 4 sessions at a time (maxOpeningSessions)"
    )
    # Each open session is a Claude Code process: by default as many stay open as fit in half the
    # machine's memory at 256 MiB each (the least recently used idle one closed past it).
    with open("/proc/meminfo") as meminfo:
        total = int(meminfo.readline().split()[1]) * 1024  # MemTotal, in KiB
    process = (await agent.aget()).process
    assert (process.live_sessions, process.live_cap) == (6, max(4, total // 2 // 2**28))
