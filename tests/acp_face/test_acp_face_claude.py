"""A real agent behind the face: claude-agent-acp (and the Claude Code it drives) against the
stand-in of the Anthropic Messages API (tests/standins/anthropic.py), offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import aconnect
from tests.acp_face.face import face
from tests.standins.anthropic import AnthropicStandIn, Reply

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "claude-agent-acp"

pytestmark = pytest.mark.timeout(120)


async def test_claude_agent_acp_works_through_the_face(daemon: Daemon, work: Path, tmp_path: Path) -> None:
    if shutil.which("node") is None or not AGENT.exists():
        pytest.fail(f"{AGENT} is missing: `./dev test` installs it (npm ci --prefix tests/interop)")
    standin = AnthropicStandIn().start()
    try:
        home = tmp_path / "claude"
        home.mkdir()
        async with aconnect(daemon.socket, start=False) as client:
            await client.agent(
                "claude",
                command=[str(AGENT)],
                env={**standin.env(), "CLAUDE_CONFIG_DIR": str(home)},
                permission_policy="allow",
            )
        notes = work / "notes.txt"
        standin.push(
            Reply.write(str(notes), "hello\n", say="Writing the notes."),
            Reply.text("The notes say hello."),
        )
        async with face(daemon, tmp_path, "--agent", "claude") as f:
            sid = await f.new(work)
            # Claude Code's first start is slow on a busy machine: a generous bound, not a sleep.
            answer = await f.prompt(sid, "write the notes", timeout=90)
            assert answer.stop_reason == "end_turn"
            editor = f.editor
            assert notes.read_text() == "hello\n"  # the agent's tool ran, at the daemon's placement
            reply = editor.text(sid)
            assert reply.startswith("Writing the notes.")
            assert reply.endswith("The notes say hello.")
            assert len(editor.of(sid, "agent_message_chunk")) > 2  # streamed in pieces
            calls = editor.of(sid, "tool_call")
            assert calls, "no tool call came through"
            updates = editor.of(sid, "tool_call_update")
            diffs = [c for u in [*calls, *updates] for c in (u.content or []) if c.type == "diff"]
            assert any(d.path == str(notes) and d.new_text == "hello\n" for d in diffs), diffs
            assert any(u.status == "completed" for u in updates)
            assert editor.of(sid, "usage_update")  # context fill as claude-agent-acp reports it
    finally:
        standin.stop()
