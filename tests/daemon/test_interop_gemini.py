"""Interoperability with gemini-cli (npm @google/gemini-cli, `gemini --acp`) against a stand-in Gemini API.

gemini-cli takes `GOOGLE_GEMINI_BASE_URL` (plain http allowed on localhost);
with it set it uses its "gateway" auth and needs no ACP `authenticate`. It
asks the client's permission for each tool (the daemon's `allow` policy picks
"Allow", once: "Allow for this session" is refused in a folder it does not
trust). It sends no `plan` for its write_todos tool and no `usage_update`
(the prompt's answer carries token counts in `_meta.quota` only), so a
session's plan stays empty and its context fill is estimated.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AsyncAgent, AsyncDaemon
from tests.daemon.interop_checks import kill_mid_turn, leave_mid_stream, module_daemon
from tests.daemon.test_interop_claude import eventually
from tests.standins.gemini import GeminiStandIn, Reply, Text

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "gemini"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon(AGENT)


@pytest.fixture(scope="module")
def standin() -> Iterator[GeminiStandIn]:
    running = GeminiStandIn().start()
    yield running
    running.stop()


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
    # No usage_update from gemini-cli: the fill is the daemon's estimate.
    assert info.context is None or info.context.estimated

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
