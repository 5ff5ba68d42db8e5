"""Real agents behind the face: codex-acp, gemini-cli and opencode, each against the stand-in of
its model API (tests/standins), offline, set up as their own interop tests set them up
(tests/daemon/test_interop_*.py). Through `sessiond acp` each streams a turn's text to the
editor in pieces, shows its tool calls (each announced by a `tool_call` before its updates: a
file's diff, a command), and stops when the editor cancels; the next turn goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.harness import Daemon
from sessiond.client import aconnect
from tests.acp_face.face import Face, face, npm_agent
from tests.standins import anthropic, gemini, openai_responses

pytestmark = pytest.mark.timeout(300)  # each agent starts once; two shared cores

TURN = 120.0  # a real agent's first turn on a busy machine: a generous bound, not a sleep
LONG = " ".join(f"word{i}" for i in range(400))  # streamed in 400 pieces, 0.05 s apart (~20 s)


async def add(daemon: Daemon, name: str, command: list[str], env: dict[str, str], **options: Any) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        await client.agent(name, command=command, env=env, **options)


def tool_calls(f: Face, sid: str) -> dict[str, list[Any]]:
    """Each tool call's updates, in order, by id: the editor first hears of each as a `tool_call`."""
    calls: dict[str, list[Any]] = {}
    for update in f.editor.of(sid):
        if update.session_update in ("tool_call", "tool_call_update"):
            calls.setdefault(update.tool_call_id, []).append(update)
    for tool_id, updates in calls.items():
        kinds = [u.session_update for u in updates]
        assert kinds == ["tool_call"] + ["tool_call_update"] * (len(kinds) - 1), (tool_id, kinds)
    return calls


def diffs(calls: dict[str, list[Any]]) -> list[tuple[str, str | None, str]]:
    return [
        (c.path, c.old_text, c.new_text)
        for updates in calls.values()
        for u in updates
        for c in u.content or []
        if c.type == "diff"
    ]


def commands(calls: dict[str, list[Any]], *, completed: bool = True) -> list[str]:
    """The titles of the `execute` calls (the command, as the agent titles it); only the completed
    ones, unless told."""
    found = []
    for updates in calls.values():
        kind = next((u.kind for u in updates if u.kind), None)
        title = next((u.title for u in reversed(updates) if u.title), "")
        if kind == "execute" and (updates[-1].status == "completed" or not completed):
            found.append(title)
    return found


async def cancel_and_go_on(
    f: Face, sid: str, slow: Callable[[], None], reply: Callable[[str], None], within: float = 20
) -> None:
    """A long answer (`slow` scripts it), cancelled by the editor once two of its pieces arrived: the
    prompt answers `cancelled` soon, with the answer cut short; the next turn (`reply` scripts its
    answer) goes on."""
    before = len(f.editor.of(sid, "agent_message_chunk"))
    slow()
    turn = asyncio.ensure_future(f.prompt(sid, "talk for a long time", timeout=TURN))
    await f.editor.until(
        lambda: len(f.editor.of(sid, "agent_message_chunk")) >= before + 2, "the long answer streaming", TURN
    )
    await f.conn.cancel(session_id=sid)
    answer = await asyncio.wait_for(turn, within)
    assert answer.stop_reason == "cancelled"
    said = "".join(u.content.text for u in f.editor.of(sid, "agent_message_chunk")[before:])
    assert said.startswith("word0 word1")
    assert len(said) < len(LONG)
    reply("Still here.")
    assert (await f.prompt(sid, "are you there?", timeout=TURN)).stop_reason == "end_turn"
    assert f.editor.text(sid).endswith("Still here.")


async def test_codex_acp_works_through_the_face(daemon: Daemon, work: Path, tmp_path: Path) -> None:
    standin = openai_responses.OpenAIResponsesStandIn().start()
    try:
        home = standin.codex_home(tmp_path / "codex")
        env = {"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
        await add(daemon, "codex", [str(npm_agent("codex-acp"))], env)
        standin.push(
            openai_responses.Call.add_file("notes.txt", "hello from codex"),
            openai_responses.Call.command("echo ran > ran.txt"),
            "Wrote the notes and left a mark.",
        )
        async with face(daemon, tmp_path, "--agent", "codex") as f:
            sid = await f.new(work)
            answer = await f.prompt(sid, "write the notes, then leave a mark", timeout=TURN)
            assert answer.stop_reason == "end_turn"
            assert f.editor.text(sid) == "Wrote the notes and left a mark."
            assert len(f.editor.of(sid, "agent_message_chunk")) > 1  # in pieces, as the model sent it
            assert (work / "notes.txt").read_text() == "hello from codex\n"
            assert (work / "ran.txt").read_text() == "ran\n"
            calls = tool_calls(f, sid)
            assert (str(work / "notes.txt"), None, "hello from codex\n") in diffs(calls)
            # codex-acp sends a command's `completed` update only now and then before its turn ends
            # (the daemon's event log has the same), so the call's start is what is sure.
            assert "echo ran > ran.txt" in commands(calls, completed=False), calls
            assert f.editor.of(sid, "usage_update")  # codex reports its context fill

            await cancel_and_go_on(
                f, sid, lambda: standin.push(openai_responses.Slow(LONG, chunks=400)), standin.push
            )
    finally:
        standin.stop()


async def test_gemini_cli_works_through_the_face(daemon: Daemon, work: Path, tmp_path: Path) -> None:
    standin = gemini.GeminiStandIn().start()
    try:
        await add(
            daemon,
            "gemini",
            [str(npm_agent("gemini")), "--acp"],
            standin.env(str(tmp_path / "home")),
            permission_policy="allow",  # the daemon answers its questions: none reach the editor
        )
        notes = work / "notes.txt"
        notes.write_text("draft\n")  # gemini-cli cannot create a file through ACP fs (see its interop test)
        standin.push(
            gemini.Reply.write(str(notes), "hello\n", say="Writing the notes."),
            gemini.Reply.shell("echo ran > ran.txt"),
            gemini.Reply.text("All done: the notes say hello."),
        )
        async with face(daemon, tmp_path, "--agent", "gemini") as f:
            sid = await f.new(work)
            answer = await f.prompt(sid, "write the notes, then leave a mark", timeout=TURN)
            assert answer.stop_reason == "end_turn"
            # gemini-cli sends its two messages with nothing between them: paragraphs here.
            assert f.editor.text(sid) == "Writing the notes.\n\nAll done: the notes say hello."
            assert len(f.editor.of(sid, "agent_message_chunk")) > 2
            assert notes.read_text() == "hello\n"  # written by the daemon, gemini-cli's ACP fs
            assert (work / "ran.txt").read_text() == "ran\n"
            assert f.editor.asked == []
            # gemini-cli sends only updates of a call it asked permission for: the face announces it.
            calls = tool_calls(f, sid)
            assert (str(notes), "draft\n", "hello\n") in diffs(calls)
            assert "echo ran > ran.txt" in commands(calls)

            long = gemini.Reply((gemini.Text(LONG, chunks=400),), delay=0.05)
            await cancel_and_go_on(f, sid, lambda: standin.push(long), standin.push)
    finally:
        standin.stop()


async def test_opencode_works_through_the_face(daemon: Daemon, work: Path, tmp_path: Path) -> None:
    standin = anthropic.AnthropicStandIn().start()
    try:
        env = standin.opencode_env(tmp_path / "home")
        await add(daemon, "opencode", [str(npm_agent("opencode")), "acp"], env)
        notes = work / "notes.txt"
        standin.push(
            anthropic.Reply.tool("write", {"filePath": str(notes), "content": "hello\n"}, say="Writing."),
            anthropic.Reply.tool(
                "edit", {"filePath": str(notes), "oldString": "hello", "newString": "hi all"}
            ),
            anthropic.Reply.tool("bash", {"command": "echo ran > ran.txt", "description": "leave a mark"}),
            anthropic.Reply.text("All done: the notes say hi all."),
        )
        async with face(daemon, tmp_path, "--agent", "opencode") as f:
            sid = await f.new(work)
            answer = await f.prompt(sid, "write the notes, then leave a mark", timeout=TURN)
            assert answer.stop_reason == "end_turn"
            assert f.editor.text(sid).endswith("All done: the notes say hi all.")
            assert len(f.editor.of(sid, "agent_message_chunk")) > 2
            assert answer.usage is not None
            assert answer.usage.output_tokens > 0
            assert notes.read_text() == "hi all\n"  # opencode's own tools, in the session's root
            assert (work / "ran.txt").read_text() == "ran\n"
            calls = tool_calls(f, sid)
            assert (str(notes), "hello", "hi all") in diffs(calls)
            assert "echo ran > ran.txt" in commands(calls)
            usage = f.editor.of(sid, "usage_update")[-1]
            assert usage.cost is not None
            assert usage.cost.amount > 0

            long = anthropic.Reply((anthropic.Text(LONG, chunks=400),), delay=0.05)
            await cancel_and_go_on(f, sid, lambda: standin.push(long), standin.push)
    finally:
        standin.stop()
