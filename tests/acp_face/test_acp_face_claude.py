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
            # Claude Code's own slash commands follow sessiond's, and its modes are offered.
            commands = await editor.until(
                lambda: [
                    u for u in editor.of(sid, "available_commands_update") if len(u.available_commands) > 5
                ],
                "Claude Code's commands",
            )
            names = [c.name for c in commands[-1].available_commands]
            assert names[:5] == ["side", "tasks", "threads", "merge", "fleet"]
            assert "compact" in names[5:], names

            # A second session offers what Claude Code offered the first; the model chosen before
            # its first prompt is the model Claude Code asks the model API for.
            second = await f.conn.new_session(cwd=str(work), mcp_servers=[])
            assert second.modes is not None
            assert {"default", "plan"} <= {m.id for m in second.modes.available_modes}
            models = next(o for o in second.config_options or [] if o.id == "model")
            assert "haiku" in [choice.value for choice in models.options]
            await f.conn.set_config_option(config_id="model", session_id=second.session_id, value="haiku")
            asked = len(standin.main_requests())
            standin.push(Reply.text("Haiku here."))
            assert (await f.prompt(second.session_id, "who is there?", timeout=90)).stop_reason == "end_turn"
            used = {str((r.body or {}).get("model")) for r in standin.main_requests()[asked:]}
            assert used, "Claude Code asked the model API nothing"
            assert all("haiku" in model for model in used), used
    finally:
        standin.stop()
