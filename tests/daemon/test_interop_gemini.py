"""Interoperability with gemini-cli (npm @google/gemini-cli, `gemini --acp`) against a stand-in Gemini API.

gemini-cli takes `GOOGLE_GEMINI_BASE_URL` (plain http allowed on localhost);
with it set it uses its "gateway" auth and needs no ACP `authenticate`. It
asks the client's permission for each tool (the daemon's `allow` policy picks
"Allow", once: "Allow for this session" is refused in a folder it does not
trust). It sends no `plan` for its write_todos tool and no `usage_update`
(the prompt's answer carries token counts in `_meta.quota`, which the daemon
takes as the turn's usage), so a session's plan stays empty and its context
fill is estimated. Its shell tool
runs commands in its own process (never through ACP terminals), in the
session's root: a worktree's, and a sandbox's unconfined. It retries a 5xx or
an unreachable API for minutes unless its settings say `general.maxAttempts`.
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
from sessiond.protocol.methods import AGENT_UPDATE
from sessiond.protocol.models import AgentInfo
from tests.daemon.interop_checks import (
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
from tests.standins.gemini import GeminiStandIn, Reply, Text

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "gemini"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon(AGENT)


@pytest.fixture(scope="module")
def _standin_server() -> Iterator[GeminiStandIn]:
    running = GeminiStandIn().start()
    yield running
    running.stop()


@pytest.fixture
def standin(_standin_server: GeminiStandIn) -> GeminiStandIn:
    """The module's stand-in, its script, records and failure fresh for each test."""
    _standin_server.reset()
    return _standin_server


@pytest.fixture
async def gemini(client: AsyncDaemon, standin: GeminiStandIn, tmp_path: Path) -> AsyncIterator[AsyncAgent]:
    """gemini-cli (~5-10 s to start), its ~/.gemini private; one test, so one agent process."""
    agent = await client.agent(
        "gemini",
        command=[str(AGENT), "--acp"],
        env=standin.env(str(tmp_path / "home")),
        permission_policy="allow",
    )
    yield agent
    await agent.aremove()


async def test_gemini_streams_text_writes_edits_and_runs_a_command_at_the_placement(
    gemini: AsyncAgent, standin: GeminiStandIn, work: Path
) -> None:
    session = await gemini.session(work)
    notes = work / "notes.txt"
    # gemini-cli 0.61.0 cannot create a file through a client that offers ACP fs: it reads the file
    # first and takes only an Error whose message says "not found" as "missing", but its ACP
    # connection rejects with the plain JSON-RPC error object (bundle/gemini-3HFX2LNT.js, lines
    # 13899 and 16285), so the write fails "Error checking existing file". An existing file works.
    notes.write_text("draft\n")
    standin.push(
        Reply.write(str(notes), "hello\n", say="Writing the notes."),
        Reply.edit(str(notes), "hello", "hello world"),
        Reply.shell("pwd > where.txt"),
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
    assert reply.text.endswith("All done: the notes say hello world.")
    assert len(chunks) > 2
    assert notes.read_text() == "hello world\n"
    assert (work / "where.txt").read_text().strip() == str(work)
    main = standin.main_requests()
    assert len(main) == 4
    assert [r.model for r in main] == ["gemini-2.5-flash"] * 4
    # Each tool's result went back to the model in the next request.
    assert [f["name"] for f in main[-1].function_responses()] == [
        "write_file",
        "replace",
        "run_shell_command",
    ]
    headers = {k.lower(): v for k, v in main[0].headers.items()}
    assert headers["x-goog-api-key"] == "standin-key"
    info = await session.aget()
    # No usage_update from gemini-cli: the fill is the daemon's estimate, against a Gemini window.
    assert info.context is not None
    assert (info.context.estimated, info.context.size) == (True, 1_048_576)
    # Its token counts come in the answer's _meta.quota: its four model calls, added up.
    assert info.usage is not None
    assert (info.usage.input_tokens, info.usage.output_tokens, info.usage.total_tokens) == (480, 120, 600)

    # A second turn carries the first one's exchange.
    standin.push("It says hello world.")
    assert (await session.asend("what do the notes say?")).text == "It says hello world."
    assert "write the notes, then check where we are" in "\n".join(standin.main_requests()[-1].texts())

    async def changed() -> bool:
        info = await session.aget()
        paths = {f.path for f in info.changes.files} if info.changes else set()
        # where.txt is made by its shell tool, in its own process: gemini-cli asks for the command
        # (session/request_permission) without a `tool_call` first, so its window opens at the answer.
        return {"notes.txt", "where.txt"} <= paths

    await eventually(changed, what="the changed files")


@pytest.mark.timeout(300)  # gemini-cli starts twice (~5-10 s each under load, more)
async def test_gemini_cancels_mid_stream_and_survives_a_kill(
    client: AsyncDaemon, gemini: AsyncAgent, standin: GeminiStandIn, work: Path
) -> None:
    # Cancel mid-stream: with its model API streaming, gemini-cli ends the turn cancelled at once.
    session = await gemini.session(work)
    long = " ".join(f"word{i}" for i in range(400))
    standin.push(Reply((Text(long, chunks=400),), delay=0.05))  # ~20 s
    await leave_mid_stream(client, session, within=20)
    standin.push("Still here.")
    assert (await session.asend("are you there?")).text.endswith("Still here.")

    # Killing the agent fails only its running turn; the next turn starts gemini-cli again.
    standin.push(Reply((Text("slow " * 200, chunks=200),), delay=0.05))  # ~10 s
    await kill_mid_turn(client, gemini, session)
    standin.push("Back.")
    # gemini-cli offers session/load; killed mid-turn it has usually saved nothing to load ("No
    # previous sessions found"): then the turn goes on in a new conversation, and the transcript says
    # so. Killed after it saved, its session/load brings the session back, and nothing is said.
    async with client.events(sessions=[session.id], kinds=["turn.ended"]) as events:
        assert (await session.asend("are you back?")).text.endswith("Back.")
        ended = await next_matching(events, kind("turn.ended"), timeout=20)
    transcript = await session.atranscript()
    said = [
        line.text for line in transcript.lines if line.role == "status" and "earlier history" in line.text
    ]
    notice = ended.data.get("notice")
    if notice is None:
        assert not said, said  # restored: no new conversation to tell of
    else:
        assert "could not restore the session (its session/load failed" in notice
        assert any("new conversation without the earlier history" in text for text in said), said
    assert (await gemini.aget()).process.starts == 2


@pytest.mark.timeout(300)  # gemini-cli starts in ~5-10 s, more under load
async def test_gemini_asks_before_a_command_and_the_answer_reaches_it(
    client: AsyncDaemon, standin: GeminiStandIn, work: Path, tmp_path: Path
) -> None:
    gemini = await client.agent(
        "gemini-asks", command=[str(AGENT), "--acp"], env=standin.env(str(tmp_path / "home"))
    )  # permission policy: ask
    session = await gemini.session(work)
    standin.push(
        Reply.shell("echo yes > allowed.txt"),
        Reply.text("Ran it."),
        Reply.shell("echo no > denied.txt"),
        Reply.text("Did not."),
    )
    asked = await allow_then_reject(client, session, "echo", timeout=60)
    assert [call.get("kind") for call in asked] == ["execute", "execute"]
    assert (work / "allowed.txt").read_text() == "yes\n"
    assert not (work / "denied.txt").exists()
    # The refusal went back to the model as the tool's result: an error saying the user cancelled it.
    refused = standin.main_requests()[3].function_responses()[-1]
    assert refused["name"] == "run_shell_command"
    assert "canceled by the user" in json.dumps(refused["response"])
    await gemini.aremove()


@pytest.mark.timeout(300)  # gemini-cli starts twice
async def test_a_restored_gemini_session_answers_with_its_new_answer_alone(
    client: AsyncDaemon, standin: GeminiStandIn, work: Path
) -> None:
    """gemini-cli streams a loaded session's history after it answers session/load (not awaited),
    so it came in as the next turn's answer: "First answer.Second answer.", the old tool calls
    and changed files with it. It is heard as history until it stops.

    gemini-cli 0.61 loads a session only (docs/agents.md): from the folder its process started in,
    not the session's (this agent's process starts in the session's folder); and when the load
    comes in another minute than the session began, as its file is named by that minute and the
    load starts a new file by that name first (the file is named here as if it began earlier)."""
    agent = await client.agent(
        "gemini-here",
        command=["sh", "-c", f'cd "{work}" && exec "{AGENT}" --acp'],
        env=standin.env(str(work.parent / "home")),
        permission_policy="allow",
    )
    session = await agent.session(work)
    (work / "kept.txt").write_text("draft\n")  # (it cannot create one: see the test above)
    standin.push(Reply.write(str(work / "kept.txt"), "kept\n"), "First answer, with a file written.")
    assert (await session.asend("write kept.txt")).text == "First answer, with a file written."
    await client._call(AGENT_UPDATE, AgentInfo, name=agent.name, restart=True)  # a new process
    chats = (work.parent / "home" / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
    (chat,) = [path for path in chats if "write kept.txt" in path.read_text()]
    chat.rename(chat.with_name(re.sub(r"T\d\d-\d\d", "T00-00", chat.name, count=1)))
    standin.push("Second answer.")
    async with client.events(sessions=[session.id], kinds=["turn.ended"]) as events:
        assert (await session.asend("and now?")).text == "Second answer."
        ended = await next_matching(events, kind("turn.ended"), timeout=20)
    assert ended.data.get("notice") is None  # restored by session/load, not a new conversation
    info = await session.aget()
    assert info.changes is not None
    assert [f.path for f in info.changes.files] == ["kept.txt"]  # (the replayed write took it away)
    lines = [line.text for line in (await session.atranscript()).lines]
    assert lines.count("First answer, with a file written.") == 1, lines
    assert (await agent.aget()).process.starts == 2
    await agent.aremove()


async def test_gemini_s_todos_reach_no_plan(gemini: AsyncAgent, standin: GeminiStandIn, work: Path) -> None:
    """gemini-cli 0.61.0's write_todos runs (its result goes back to the model) but sends no ACP
    `plan`: its ACP session sends a tool call and its end, and the todos are only in the tool's
    `returnDisplay`, which `toToolCallContent` drops for anything but a file diff
    (bundle/gemini-3HFX2LNT.js, line 14818). So the session's plan stays empty."""
    session = await gemini.session(work)
    standin.push(
        Reply.todos(("Write the notes", "in_progress"), ("Check them", "pending")),
        Reply.text("Planned."),
    )
    assert (await session.asend("plan the work")).text.endswith("Planned.")
    (answered,) = standin.main_requests()[-1].function_responses()
    assert answered["name"] == "write_todos"
    assert "Successfully updated the todo list" in json.dumps(answered["response"])
    assert "[in_progress] Write the notes" in json.dumps(answered["response"])
    transcript = await session.atranscript()
    assert any(line.role == "tool" and "Set 2 todo(s)" in line.text for line in transcript.lines)
    assert (await session.aget()).plan is None


@pytest.mark.timeout(300)  # gemini-cli starts in ~5-10 s, more under load
async def test_gemini_runs_commands_itself_in_a_worktree_and_unconfined_in_a_sandbox(
    gemini: AsyncAgent, standin: GeminiStandIn, tmp_path: Path
) -> None:
    """Its shell tool runs in gemini-cli's own process (it never asks for an ACP terminal), in the
    session's root: a worktree session's commands land in its worktree; a sandbox session's are not
    in the daemon's bubblewrap, so a file outside the root is written."""
    repo = git_repo(tmp_path / "repo")
    session = await gemini.session(repo, placement="worktree")
    standin.push(Reply.shell("pwd > where.txt"), Reply.text("Ran it."))
    assert (await session.asend("where are we?")).text.endswith("Ran it.")
    await landed_in_its_worktree(session, repo)
    await shows_changed(session, "where.txt")

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "boxed"
    root.mkdir()
    boxed = await gemini.session(root, placement="sandbox")
    standin.push(Reply.shell(f"pwd > where.txt && touch {outside}/escaped.txt"), Reply.text("Ran it."))
    assert (await boxed.asend("where are we?")).text.endswith("Ran it.")
    assert (root / "where.txt").read_text().strip() == str(root)
    assert (outside / "escaped.txt").exists()  # not confined
    await shows_changed(boxed, "where.txt")


def _settings(home: Path, settings: dict[str, object]) -> Path:
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return home


@pytest.mark.timeout(300)  # gemini-cli starts in ~5-10 s, more under load
async def test_gemini_fails_fast_when_its_model_api_refuses_breaks_or_is_gone(
    client: AsyncDaemon, standin: GeminiStandIn, work: Path, tmp_path: Path
) -> None:
    """gemini-cli fails a 401 at once but retries a 5xx or an unreachable API 10 times, 5 s
    doubling to 30 s apart (over 100 s, nothing said over ACP). Its settings' `general.maxAttempts`
    (1-10) bounds that; at 1 each failure ends the turn in its words, with what to do."""
    home = _settings(tmp_path / "home", {"general": {"maxAttempts": 1}})
    gemini = await client.agent(
        "gemini-fails", command=[str(AGENT), "--acp"], env=standin.env(str(home)), permission_policy="allow"
    )
    session = await gemini.session(work)
    standin.push("Fine.")
    assert (await session.asend("warm up")).text.endswith("Fine.")

    standin.fail_with(401)
    message = await fails_fast(session, "say hello")
    assert '"code":401,"message":"the stand-in answers 401"' in message  # the API's words, as it passes them
    assert "check the API key in its env" in message

    standin.fail_with(500)
    message = await fails_fast(session, "say hello again")
    assert '"code":500' in message
    assert "failing on its side: send the prompt again later" in message
    assert len([r for r in standin.requests if "streamGenerateContent" in r.path]) == 3  # no retry

    standin.fail_with(None)
    standin.push("Back.")
    assert (await session.asend("and now?")).text.endswith("Back.")  # the session carries on
    await gemini.aremove()

    env = {**standin.env(str(home)), "GOOGLE_GEMINI_BASE_URL": unreachable_url()}
    gone = await client.agent("gemini-gone", command=[str(AGENT), "--acp"], env=env)
    message = await fails_fast(await gone.session(work), "say hello")
    assert "fetch failed" in message
    assert "could not reach its model API" in message
    await gone.aremove()


@pytest.mark.timeout(300)  # gemini-cli starts in ~5-10 s, more under load
async def test_gemini_opens_many_sessions_at_once_one_after_another(
    gemini: AsyncAgent, standin: GeminiStandIn, work: Path
) -> None:
    """gemini-cli 0.61.0 takes a lock on ~/.gemini/projects.json in each session/new, and its waiters
    retry after 0.1, 0.2, 0.4 ... s: of 15 asked at once, 5 were still unanswered a minute later
    (the last after ~7 minutes). The daemon asks it one at a time: 15 first turns at once all end."""
    sessions = await gemini.sessions(15, work)
    replies = await asyncio.wait_for(
        asyncio.gather(*(session.asend(f"say {n}") for n, session in enumerate(sessions))), 90
    )
    assert [reply.stop_reason for reply in replies] == ["end_turn"] * 15
    assert all(reply.text == "done" for reply in replies)  # (the stand-in's default answer)
