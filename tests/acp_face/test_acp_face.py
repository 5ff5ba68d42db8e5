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
from typing import Any

import acp
import pytest
from acp import schema

from bench.harness import Daemon
from sessiond.client import aconnect
from sessiond.client.acp_face.agent import FaceAgent, FaceOptions
from sessiond.protocol.models import EventKind
from tests.acp_face.face import WAIT, Editor, face
from tests.security.wire import Wire

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
        # Streamed in the agent's pieces; the message after the write a paragraph of its own.
        assert editor.text(sid) == "hello\n\ndone"
        assert [u.content.text for u in editor.of(sid, "agent_message_chunk")] == ["hello", "\n\ndone"]
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
        # Opened with no title, the session is named by its first prompt's first line.
        assert [u.title for u in editor.of(sid, "session_info_update")] == ["plan Read | Write"]

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


async def test_resume_fork_and_close_through_the_face(daemon: Daemon, work: Path, tmp_path: Path) -> None:
    async with face(daemon, tmp_path) as first:
        sid = await first.new(work)
        await first.prompt(sid, "say remember the plum")

    # Another editor (another `sessiond acp`) resumes it: no replay, the same daemon session goes on.
    async with (
        face(daemon, tmp_path, initialize=False) as second,
        aconnect(daemon.socket, start=False) as other,
    ):
        init = await second.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        offered = init.agent_capabilities.session_capabilities
        assert None not in (offered.list, offered.resume, offered.fork, offered.close)
        editor = second.editor
        await asyncio.wait_for(
            second.conn.resume_session(session_id=sid, cwd=str(work), mcp_servers=[]), WAIT
        )
        await editor.until(lambda: editor.of(sid, "available_commands_update"), "the commands")
        assert editor.of(sid, "user_message_chunk") == editor.of(sid, "agent_message_chunk") == []
        await second.prompt(sid, "history")
        assert editor.text(sid) == "1. say remember the plum"  # the prompts before this one
        main = await other.session(sid)
        assert (await main.aget()).turns == 2

        # A fork: a session of its own from the main one's context, writable; the main one untouched.
        before = (await main.atranscript(offset=0, limit=1000)).model_dump(exclude={"head"})
        forked = await asyncio.wait_for(
            second.conn.fork_session(session_id=sid, cwd=str(work), mcp_servers=[]), WAIT
        )
        fid = forked.session_id
        assert fid != sid
        await second.prompt(fid, "write fork.txt forked\nhistory")
        assert (work / "fork.txt").read_text() == "forked"
        assert editor.text(fid) == "1. say remember the plum\n2. history"  # the main one's, forked
        assert "forked" not in editor.text(sid)
        assert (await main.atranscript(offset=0, limit=1000)).model_dump(exclude={"head"}) == before
        assert (await main.aget()).turns == 2
        rows = {
            row["id"]: row
            for row in map(json.loads, sessiond(daemon, "ls", "--json").stdout.split("\n")[:-1])
        }
        assert rows[fid]["kind"] == "side"
        assert rows[fid]["parent"] == sid

        # Close: the face's running turn in it is cancelled (ACP: close cancels the session's work);
        # the daemon's session stays open, history and all, so it can be resumed again.
        turn = asyncio.ensure_future(second.prompt(sid, "say working\nhang"))
        await editor.until(lambda: "working" in editor.text(sid), "the chunk before hanging")
        await asyncio.wait_for(second.conn.close_session(session_id=sid), WAIT)
        assert (await asyncio.wait_for(turn, WAIT)).stop_reason == "cancelled"
        listed = sessiond(daemon, "ls", "--json")
        row = next(json.loads(line) for line in listed.stdout.splitlines() if json.loads(line)["id"] == sid)
        assert row["status"] == "stopped"
        assert (await main.aget()).last_stop_reason == "cancelled"
        # Another client goes on with it meanwhile; resumed, the editor is told where it stands.
        await main.asend("mode plan")
        resumed = await second.conn.resume_session(session_id=sid, cwd=str(work), mcp_servers=[])
        assert resumed.modes is not None
        assert resumed.modes.current_mode_id == "plan"
        await second.prompt(sid, "say back again")
        assert editor.text(sid).endswith("back again")

        # Closed for good (`sessiond close`), then loaded again from the editor: it reopens, its
        # conversation replayed, and goes on at its agent.
        assert sessiond(daemon, "close", sid).returncode == 0
        await asyncio.wait_for(second.conn.load_session(session_id=sid, cwd=str(work), mcp_servers=[]), WAIT)
        assert (await main.aget()).status.value == "idle"
        await second.prompt(sid, "say open again")
        assert editor.text(sid).endswith("open again")
        assert (await main.aget()).turns == 6


async def test_the_editor_answers_first_and_the_other_clients_questions_are_withdrawn(
    daemon: Daemon, work: Path, tmp_path: Path
) -> None:
    """Another client that answers permissions (as the Neovim panel and VS Code do) is asked too;
    the editor answers first, and the other client's question is withdrawn."""
    editor = Editor()
    release: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    editor.answer = lambda options: release
    async with face(daemon, tmp_path, editor=editor) as f:
        panel = await Wire.unix(str(daemon.socket))
        try:
            assert "result" in await panel.initialize({"answersPermissions": True}, WAIT)
            sid = await f.new(work)
            turn = asyncio.ensure_future(f.prompt(sid, "ask Deploy?\nsay after"))
            asked = await panel.next_request("session/requestPermission", WAIT)
            assert asked["params"]["toolCall"]["title"] == "Deploy?"
            await editor.until(lambda: editor.asked, "the question at the editor")
            (question,) = editor.asked
            release.set_result(next(o.option_id for o in question.options if o.kind == "allow_once"))
            assert (await turn).stop_reason == "end_turn"
            assert editor.text(sid) == 'Asked "Deploy?": Allow\nafter'
            withdrawn = await panel.next_request("$/cancelRequest", WAIT)
            assert withdrawn["params"]["id"] == asked["id"]
            # Nothing of it was withdrawn from the editor, which answered.
            assert not [m for m in editor.raw if m.get("method") == "$/cancel_request"]
        finally:
            await panel.close()


async def test_attached_files_reach_the_agent_and_images_are_refused(
    daemon: Daemon, work: Path, tmp_path: Path
) -> None:
    """A file attached in the editor (a link, or its text embedded, unsaved changes and all) is in
    the text prompt the agent gets; an image cannot be, and the prompt is refused saying so."""
    notes = work / "notes.txt"
    notes.write_text("on disk\n")
    async with face(daemon, tmp_path) as f, aconnect(daemon.socket, start=False) as other:
        sid = await f.new(work)
        prompt: list[Any] = [
            schema.TextContentBlock(type="text", text="compare"),
            schema.ResourceContentBlock(type="resource_link", uri=notes.as_uri(), name="notes.txt"),
            schema.TextContentBlock(type="text", text=" with "),
            schema.EmbeddedResourceContentBlock(
                type="resource",
                resource=schema.TextResourceContents(
                    uri=(work / "draft.py").as_uri(), mime_type="text/x-python", text="print('unsaved')\n"
                ),
            ),
        ]
        answer = await asyncio.wait_for(f.conn.prompt(session_id=sid, prompt=prompt), WAIT)
        assert answer.stop_reason == "end_turn"
        sent = (
            f"compare @{notes} with @{work / 'draft.py'}\n\n"
            f'<resource uri="{(work / "draft.py").as_uri()}" mimeType="text/x-python">\n'
            "print('unsaved')\n</resource>"
        )
        assert f.editor.text(sid).startswith(f"You said: {sent}")  # what the demo agent was sent
        async with other.trace(sessions=[sid], kinds=[EventKind.TURN_QUEUED]) as log:
            assert [event.data["prompt"] async for event in log] == [sent]

        image = schema.ImageContentBlock(type="image", data="iVBORw0KGgo=", mime_type="image/png")
        with pytest.raises(
            acp.RequestError, match=r"sessiond: part 2 of the prompt is an image \(image/png\)"
        ):
            await f.conn.prompt(session_id=sid, prompt=[prompt[0], image])
        binary = schema.EmbeddedResourceContentBlock(
            type="resource",
            resource=schema.BlobResourceContents(
                uri=(work / "logo.png").as_uri(), blob="AAAA", mime_type="image/png"
            ),
        )
        with pytest.raises(acp.RequestError, match=r"part 1 of the prompt is a binary resource"):
            await f.conn.prompt(session_id=sid, prompt=[binary])
        assert (await (await other.session(sid)).aget()).turns == 1  # nothing of them reached the agent


@pytest.mark.timeout(240)  # the demo agent and the editor's server start twice, and a daemon
async def test_the_editor_s_mcp_servers_reach_the_agent(daemon: Daemon, work: Path, tmp_path: Path) -> None:
    """The editor's MCP server (stdio, given in session/new) is the session's: its agent starts it
    and calls its tool, again after the daemon restarted, and from a fork; what cannot be given
    (an sse server, or the name of the daemon's own) is refused saying so."""
    tools = schema.McpServerStdio(
        name="editor",
        command=sys.executable,
        args=[str(Path(__file__).with_name("editor_tools.py"))],
        env=[schema.EnvVariable(name="EDITOR_TOOLS_MARK", value="from the editor")],
    )
    async with face(daemon, tmp_path, initialize=False) as f:
        init = await f.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        mcp = init.agent_capabilities.mcp_capabilities
        assert (mcp.http, mcp.sse) == (False, False)  # the demo agent has not run yet: stdio only
        opened = await f.conn.new_session(cwd=str(work), mcp_servers=[tools])
        sid = opened.session_id
        await f.prompt(sid, 'mcp editor/shout {"text": "hello"}', timeout=60)
        assert f.editor.text(sid) == "HELLO (from the editor)"
        (call,) = f.editor.of(sid, "tool_call")
        assert call.title == "Call editor shout"

        # A fork is given the same tools.
        forked = await f.conn.fork_session(session_id=sid, cwd=str(work), mcp_servers=[])
        await f.prompt(forked.session_id, 'mcp editor/shout {"text": "fork"}', timeout=60)
        assert f.editor.text(forked.session_id) == "FORK (from the editor)"

        sse = schema.SseMcpServer(type="sse", name="remote", url="http://127.0.0.1:9/sse", headers=[])
        with pytest.raises(acp.RequestError, match=r"sessiond: the MCP server 'remote' is an sse one"):
            await f.conn.new_session(cwd=str(work), mcp_servers=[sse])
        taken = schema.McpServerStdio(name="sessiond", command=sys.executable, args=[], env=[])
        with pytest.raises(acp.RequestError, match=r"'sessiond' is the name of the daemon's own MCP server"):
            await f.conn.new_session(cwd=str(work), mcp_servers=[taken])

    # Kept with the session: after a daemon restart its agent starts the editor's server again.
    assert daemon.stop() == 0
    restarted = Daemon(daemon.home).start()
    try:
        async with face(restarted, tmp_path) as f:
            await f.conn.resume_session(session_id=sid, cwd=str(work), mcp_servers=[])
            await f.prompt(sid, 'mcp editor/shout {"text": "again"}', timeout=60)
            assert f.editor.text(sid) == "AGAIN (from the editor)"
    finally:
        assert restarted.stop() == 0
