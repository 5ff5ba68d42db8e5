"""`sessiond acp` end to end: the ACP Python SDK's client drives it, the demo agent works behind it."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import acp
import pytest

from bench.harness import Daemon
from sessiond.client import aconnect
from sessiond.client.acp_face.agent import FaceAgent, FaceOptions
from sessiond.protocol.models import EventKind
from tests.acp_face.face import WAIT, Editor, face

pytestmark = pytest.mark.timeout(90)


def sessiond(daemon: Daemon, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiond.client", *argv],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )


async def test_a_turn_streams_to_the_editor_others_see_it_and_side_leaves_the_main_untouched(
    daemon: Daemon, work: Path, tmp_path: Path
) -> None:
    async with face(daemon, tmp_path) as f, aconnect(daemon.socket, start=False) as other:
        editor = f.editor
        sid = await f.new(work)
        # Offered at once: sessiond's own powers as slash commands.
        commands = await editor.until(lambda: editor.of(sid, "available_commands_update"), "the commands")
        assert [c.name for c in commands[-1].available_commands] == [
            "side",
            "tasks",
            "threads",
            "merge",
            "fleet",
        ]

        answer = await f.prompt(
            sid,
            "plan Read | Write\nprogress 1 in_progress\nthink looking\nsay hello\nwrite notes.txt hi there\n"
            "progress 1 completed\nusage 150 1000 0.5\ntokens 12 3\nsay done",
        )
        assert answer.stop_reason == "end_turn"
        assert (answer.usage.input_tokens, answer.usage.output_tokens) == (12, 3)
        assert (work / "notes.txt").read_text() == "hi there"  # the daemon wrote it, at the placement
        assert editor.text(sid) == "hello\ndone"  # streamed in the agent's pieces
        assert [u.content.text for u in editor.of(sid, "agent_message_chunk")] == ["hello", "\ndone"]
        assert editor.text(sid, "agent_thought_chunk") == "looking"
        plans = editor.of(sid, "plan")
        assert [(e.content, e.status) for e in plans[0].entries] == [
            ("Read", "pending"),
            ("Write", "pending"),
        ]
        assert [(e.content, e.status) for e in plans[-1].entries] == [
            ("Read", "completed"),
            ("Write", "pending"),
        ]
        (start,) = editor.of(sid, "tool_call")
        assert (start.title, start.kind, start.status) == ("Write notes.txt", "edit", "in_progress")
        assert [loc.path for loc in start.locations] == [str(work / "notes.txt")]
        (diff,) = start.content
        assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
            "diff",
            str(work / "notes.txt"),
            None,
            "hi there",
        )
        updates = editor.of(sid, "tool_call_update")
        assert updates[-1].tool_call_id == start.tool_call_id
        assert updates[-1].status == "completed"
        usage = editor.of(sid, "usage_update")[-1]
        assert (usage.used, usage.size, usage.cost.amount) == (150, 1000, 0.5)
        kinds = [u.session_update for s, u in editor.updates if s == sid]
        assert kinds.index("tool_call") < kinds.index("tool_call_update")

        # A turn that works until cancelled: the fleet sees it, `sessiond ls` lists it, and a second
        # client's subscription hears it, while the editor watches.
        async with other.events(sessions=[sid]) as events:
            turn = asyncio.ensure_future(f.prompt(sid, "say working on it\nhang"))
            await editor.until(lambda: "working on it" in editor.text(sid), "the chunk before hanging")
            async with asyncio.timeout(WAIT):
                async for event in events:
                    if event.kind is EventKind.TURN_CHUNK and "working on it" in event.data["text"]:
                        break
            listed = sessiond(daemon, "ls", "--json")
            assert listed.returncode == 0, listed.stderr
            (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
            assert (row["id"], row["status"], row["root"]) == (sid, "working", str(work))
            await f.conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"
        info = (await other.session(sid)).info
        assert info.status.value == "stopped"
        assert info.last_stop_reason == "cancelled"

        # /side: answered in the editor, the main transcript left byte for byte as it was.
        await f.prompt(sid, "say the main line\nwrite main.txt kept")
        main = await other.session(sid)
        before = (await main.atranscript(offset=0, limit=1000)).model_dump(exclude={"head"})
        info_before = await main.aget()

        answer = await f.prompt(sid, "/side say forty-two")
        assert answer.stop_reason == "end_turn"
        assert f.editor.of(sid, "agent_message_chunk")[-1].content.text == "forty-two"
        assert "nothing was added to" in f.editor.of(sid, "agent_thought_chunk")[-1].content.text

        assert (await main.atranscript(offset=0, limit=1000)).model_dump(
            exclude={"head"}
        ) == before  # byte for byte
        info_after = await main.aget()
        assert info_after.turns == info_before.turns
        sides = await other.sessions(kind=["side"], include_closed=True)
        assert [(s.info.parent, s.info.status.value) for s in sides] == [(sid, "closed")]

        await f.prompt(sid, "/fleet")
        assert f.editor.of(sid, "agent_message_chunk")[-1].content.text == "0 working · 1 open"
        await f.prompt(sid, "/tasks")
        assert "No suggested tasks" in f.editor.of(sid, "agent_message_chunk")[-1].content.text
        await f.prompt(sid, "/threads")
        assert f.editor.of(sid, "agent_message_chunk")[-1].content.text == f"{sid} has no threads."
        with pytest.raises(acp.RequestError, match="not in a worktree"):
            await f.prompt(sid, "/merge")
        with pytest.raises(acp.RequestError, match=r"/side <question>"):
            await f.prompt(sid, "/side")
        assert (await main.atranscript(offset=0, limit=1000)).model_dump(exclude={"head"}) == before


async def test_permissions_reach_the_editor_and_a_killed_face_loads_the_transcript_back(
    daemon: Daemon, work: Path, tmp_path: Path
) -> None:
    editor = Editor()
    editor.answer = lambda options: next(o.option_id for o in options if o.kind == "reject_once")
    async with face(daemon, tmp_path, editor=editor) as first, aconnect(daemon.socket, start=False) as other:
        asker = await first.new(work)
        answer = await first.prompt(asker, "ask Push to main?\nsay after")
        assert answer.stop_reason == "end_turn"
        (asked,) = editor.asked
        assert asked.tool_call.title == "Push to main?"
        assert [o.kind for o in asked.options] == ["allow_once", "reject_once"]
        assert editor.text(asker) == 'Asked "Push to main?": Reject\nafter'

        # The editor sits on the question; another client answers first: the editor's is withdrawn.
        never: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        editor.answer = lambda options: never
        async with other.events(sessions=[asker], kinds=[EventKind.PERMISSION_ASKED]) as events:
            turn = asyncio.ensure_future(first.prompt(asker, "ask Deploy?"))
            async with asyncio.timeout(WAIT):
                asked_event = await anext(aiter(events))
            await editor.until(lambda: len(editor.asked) == 2, "the second question at the editor")
            assert await other.answer_permission(asked_event.data["permission"], "allow_once")
            assert (await turn).stop_reason == "end_turn"
        assert editor.text(asker).endswith('Asked "Deploy?": Allow')
        request_ids = [m["id"] for m in editor.raw if m.get("method") == "session/request_permission"]
        withdrawn = await editor.until(
            lambda: [m for m in editor.raw if m.get("method") == "$/cancel_request"], "the withdrawal"
        )
        assert withdrawn[0]["params"] == {"requestId": request_ids[-1]}
        assert not never.done()

        # A session of two turns; then the face is killed (the daemon keeps the session).
        sid = await first.new(work)
        await first.prompt(sid, "plan One | Two\nsay first reply")
        await first.prompt(sid, "write a.txt A\nsay second\nsay reply")
        first.process.send_signal(signal.SIGKILL)
        await first.process.wait()

    async with face(daemon, tmp_path) as second:
        listed = await second.conn.list_sessions(cwd=str(work))
        assert {s.session_id for s in listed.sessions} == {asker, sid}
        assert {s.cwd for s in listed.sessions} == {str(work)}
        elsewhere = await second.conn.list_sessions(cwd=str(tmp_path))
        assert elsewhere.sessions == []

        await asyncio.wait_for(second.conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[]), WAIT)
        editor = second.editor
        kinds = [u.session_update for _, u in editor.updates]
        # Replayed before the answer: prompts, replies, the tool call with its diff, the plan.
        assert [u.content.text for u in editor.of(sid, "user_message_chunk")] == [
            "plan One | Two\nsay first reply",
            "write a.txt A\nsay second\nsay reply",
        ]
        assert editor.text(sid) == "first reply" + "second\nreply"
        (tool,) = editor.of(sid, "tool_call")
        assert tool.content[0].new_text == "A"
        assert [e.content for e in editor.of(sid, "plan")[-1].entries] == ["One", "Two"]
        assert kinds.index("user_message_chunk") < kinds.index("agent_message_chunk")

        # And the session goes on where it was.
        await second.prompt(sid, "history")
        assert "1. plan One | Two\\nsay first reply" in editor.text(sid)

        with pytest.raises(acp.RequestError, match=r"sessiond: .*s404.*sessiond ls --all"):
            await second.conn.load_session(cwd=str(work), session_id="s404", mcp_servers=[])


async def test_errors_carry_the_sentence_the_cli_prints(daemon: Daemon, work: Path) -> None:
    """The face's agent in this process (the subprocess tests above prove the wiring)."""

    async def failing(step: Callable[[FaceAgent], Awaitable[object]], **options: str) -> str:
        agent = FaceAgent(FaceOptions(**{"socket": str(daemon.socket), **options}))
        try:
            with pytest.raises(acp.RequestError) as raised:
                await step(agent)
        finally:
            await agent.aclose()
        return str(raised.value.args[0])

    def initialize(agent: FaceAgent) -> Awaitable[object]:
        return agent.initialize(protocol_version=acp.PROTOCOL_VERSION)

    unknown = await failing(initialize, agent="nobody")
    cli = sessiond(daemon, "new", "--agent", "nobody")
    assert unknown == cli.stderr.strip()
    assert "list agents with `sessiond agents`" in unknown

    # A root outside the placement's rules: not in git, so no worktree can be made.
    outside = await failing(lambda agent: agent.new_session(cwd=str(work)), placement="worktree")
    cli = sessiond(daemon, "new", "--placement", "worktree", "--root", str(work))
    assert outside == cli.stderr.strip()

    mode = await failing(lambda agent: agent.set_session_mode(session_id="s404", mode_id="plan"))
    cli = sessiond(daemon, "mode", "s404", "plan")
    assert mode == cli.stderr.strip()

    # A daemon that cannot start: a socket path too long for a unix socket.
    cannot = await failing(initialize, socket="/tmp/" + "x" * 120 + "/sessiond.sock")
    assert re.match(r"sessiond: socket path .* unix sockets allow 107", cannot), cannot


async def test_modes_and_config_options_pass_through_per_session(
    daemon: Daemon, work: Path, tmp_path: Path
) -> None:
    """Chosen in the editor before the first prompt, said to the agent when the session opens; the
    agent's own switch reaches the editor; the next session offers what the agent offered."""
    async with face(daemon, tmp_path) as f, aconnect(daemon.socket, start=False) as other:
        editor = f.editor
        first = await f.conn.new_session(cwd=str(work), mcp_servers=[])
        sid = first.session_id
        assert first.modes is None  # the demo agent has never run: it has not said its modes yet
        await f.conn.set_session_mode(session_id=sid, mode_id="plan")
        await f.prompt(sid, "model")
        assert editor.text(sid) == "Model: demo-small. Mode: plan."
        # Its options reach the editor once the agent said them (the session opened there).
        options = await editor.until(lambda: editor.of(sid, "config_option_update"), "the config options")
        assert [o.id for o in options[-1].config_options] == ["model"]

        changed = await f.conn.set_config_option(config_id="model", session_id=sid, value="demo-large")
        (model,) = changed.config_options
        assert (model.id, model.current_value) == ("model", "demo-large")
        assert (await (await other.session(sid)).acontrols()).chosen.config == {"model": "demo-large"}

        await f.prompt(sid, "mode default")  # the agent leaves plan mode itself
        switched = await editor.until(lambda: editor.of(sid, "current_mode_update"), "the mode switch")
        assert switched[-1].current_mode_id == "default"

        second = await f.conn.new_session(cwd=str(work), mcp_servers=[])
        assert second.modes is not None
        assert [m.id for m in second.modes.available_modes] == ["default", "plan"]
        assert second.modes.current_mode_id == "default"
        with pytest.raises(
            acp.RequestError, match=r"offers the modes default, plan for session s\d+, not 'fast'"
        ):
            await f.conn.set_session_mode(session_id=second.session_id, mode_id="fast")
