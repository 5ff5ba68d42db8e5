"""The demo agent: its script parser (unit) and the real agent process over ACP (end to end)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ClientCapabilities,
    EnvVariable,
    McpServerStdio,
    PromptResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
)
from demo_agent_client import TIMEOUT, FakeSessiond, RecordingClient, RunningAgent, running_agent

from sessiond.daemon.demo_agent.agent import AgentOptions, DemoAgent
from sessiond.daemon.demo_agent.script import (
    COMMANDS,
    Ask,
    CallMcpTool,
    Crash,
    Echo,
    EditFile,
    Fail,
    Hang,
    NameSession,
    Progress,
    Prose,
    ReadFile,
    ReportUsage,
    RunCommand,
    Say,
    Script,
    ScriptSyntaxError,
    SetPlan,
    ShellCommand,
    ShowHistory,
    ShowModel,
    Sleep,
    StartThread,
    SuggestTask,
    SwitchMode,
    Think,
    TurnTokens,
    WaitThreads,
    WriteFile,
    WriteStderr,
    parse_prompt,
    unescape,
)
from sessiond.daemon.demo_agent.state import SessionRecord, SessionStore

# --- the parser ---------------------------------------------------------------------


def actions(text: str) -> list[Any]:
    parsed = parse_prompt(text)
    assert isinstance(parsed, Script), parsed
    return [step.action for step in parsed.steps]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("say hello world", Say("hello world")),
        ("say", Say("")),
        ("think let me see", Think("let me see")),
        ("plan Read | Think hard |  Answer ", SetPlan(("Read", "Think hard", "Answer"))),
        ("progress 2 in_progress", Progress(2, "in_progress")),
        ("progress 1 completed", Progress(1, "completed")),
        ("write notes.txt hello there", WriteFile("notes.txt", "hello there", append=False)),
        ("write empty.txt", WriteFile("empty.txt", "", append=False)),
        ('write "my notes.txt" hi', WriteFile("my notes.txt", "hi", append=False)),
        ("append log.txt one more", WriteFile("log.txt", "one more", append=True)),
        ("edit a.py foo = 1 => foo = 2", EditFile("a.py", "foo = 1", "foo = 2")),
        ("edit a.py  # TODO =>", EditFile("a.py", "# TODO", "")),
        ("read 'some dir/a.txt'", ReadFile("some dir/a.txt")),
        ("run echo 'a b' c", RunCommand(("echo", "a b", "c"))),
        ("shell sh -c 'echo a > a.txt'", ShellCommand(("sh", "-c", "echo a > a.txt"))),
        ("usage 1200 200000", ReportUsage(1200, 200000, None)),
        ("usage 1200 200000 0.25", ReportUsage(1200, 200000, 0.25)),
        ("tokens 10 20", TurnTokens(10, 20)),
        ("ask Delete the branch?", Ask("Delete the branch?")),
        ("sleep 0.5", Sleep(0.5)),
        ("hang", Hang()),
        ("fail the disk is full", Fail("the disk is full")),
        ("fail", Fail("scripted failure")),
        ("crash", Crash(3)),
        ("crash 9", Crash(9)),
        ("stderr 200000", WriteStderr(200000)),
        ("history", ShowHistory()),
        ("model", ShowModel()),
        ("mode plan", SwitchMode("plan")),
        ("title Fix the login bug\\n", NameSession("Fix the login bug\n")),
        (r"echo a\nb  ", Echo(r"a\nb  ")),
        (
            "suggest Fix the flaky test | make tests pass | it failed twice",
            SuggestTask("Fix the flaky test", "make tests pass", "it failed twice"),
        ),
        ("suggest Tidy up|remove dead code", SuggestTask("Tidy up", "remove dead code", None)),
        ("suggest T | P |  ", SuggestTask("T", "P", None)),
        ("suggest T | a | b | c", SuggestTask("T", "a", "b | c")),
        ("thread say hello", StartThread("say hello")),
        ("wait", WaitThreads(None)),
        ("wait 2.5", WaitThreads(2.5)),
        ('mcp thread_status {"id": "t-1"}', CallMcpTool("thread_status", {"id": "t-1"})),
        ("mcp wait_threads", CallMcpTool("wait_threads", {})),
        ('mcp editor/shout {"text": "hi"}', CallMcpTool("shout", {"text": "hi"}, "editor")),
    ],
)
def test_each_command_parses(line: str, expected: Any) -> None:
    assert actions(line) == [expected]


def test_every_command_has_a_parser_test() -> None:
    assert set(COMMANDS) == {
        "say", "think", "plan", "progress", "write", "append", "edit", "read", "run", "shell", "usage",
        "tokens", "ask", "sleep", "hang", "fail", "crash", "stderr", "history", "model", "mode",
        "title", "echo", "suggest", "thread", "wait", "mcp",
    }  # fmt: skip


def test_escapes_in_text_but_not_in_echo() -> None:
    assert actions(r"say one\ntwo\tthree \\n \q") == [Say("one\ntwo\tthree \\n \\q")]
    assert actions(r"write a.txt x\ny") == [WriteFile("a.txt", "x\ny", append=False)]
    assert actions(r"edit a.txt x\ny => z\\") == [EditFile("a.txt", "x\ny", "z\\")]
    assert actions(r"echo x\ny") == [Echo(r"x\ny")]
    assert unescape(r"\\n") == r"\n"
    # The prompts of suggested tasks and threads are scripts of their own: escapes make their lines.
    assert actions(r"suggest T\n | say a\nsay b | x\ty") == [SuggestTask(r"T\n", "say a\nsay b", "x\ty")]
    assert actions(r"thread say one\nsay two") == [StartThread("say one\nsay two")]


def test_prose_when_the_first_word_is_not_a_command() -> None:
    assert parse_prompt("Hello there, agent") == Prose("Hello there, agent")
    assert parse_prompt("Say hello (capitalised: not a command)") == Prose(
        "Say hello (capitalised: not a command)"
    )
    assert parse_prompt("please\nsay hi") == Prose("please\nsay hi")
    assert parse_prompt("") == Prose("")
    assert parse_prompt("  \n\n") == Prose("")


def test_blank_lines_and_comments_are_skipped_and_lines_keep_their_numbers() -> None:
    parsed = parse_prompt("# a comment\n\n  say hi\n   # another\nsay there\r\n")
    assert isinstance(parsed, Script)
    assert [(step.line, step.action) for step in parsed.steps] == [(3, Say("hi")), (5, Say("there"))]


def test_unknown_command_names_the_line_and_lists_commands() -> None:
    with pytest.raises(ScriptSyntaxError) as caught:
        parse_prompt("say hi\n# fine\nfrobnicate now")
    assert caught.value.line == 3
    assert caught.value.source == "frobnicate now"
    message = str(caught.value)
    assert message.startswith("line 3: unknown command 'frobnicate'")
    assert all(command in message for command in COMMANDS)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("progress 0 pending", "N must be at least 1"),
        ("progress x pending", "N must be a whole number"),
        ("progress 1 done", "STATUS must be one of"),
        ("progress 1", "expected progress N"),
        ("plan | |", "expected plan"),
        ("write", "missing PATH"),
        ("write 'unclosed x", "unclosed"),
        ("edit a.txt foo", "missing ' => '"),
        ("edit a.txt => new", "OLD must not be empty"),
        ("read a.txt b.txt", "read takes one PATH"),
        ("run", "expected run COMMAND"),
        ("run echo 'unbalanced", "cannot split"),
        ("shell", "expected shell COMMAND"),
        ("usage 10", "expected usage USED SIZE"),
        ("usage 10 x", "SIZE must be a whole number"),
        ("usage 10 100 nan", "COST must be a finite number"),
        ("tokens 1", "expected tokens INPUT OUTPUT"),
        ("ask", "expected ask TEXT"),
        ("sleep", "expected sleep SECONDS"),
        ("sleep -1", "SECONDS must be a finite number"),
        ("sleep inf", "SECONDS must be a finite number"),
        ("hang on", "hang takes no arguments"),
        ("history please", "history takes no arguments"),
        ("mode fast", "mode takes one of default, plan, not 'fast'"),
        ("mode", "expected mode NAME"),
        ("title", "expected title TEXT"),
        ("crash 256", "CODE must be at most 255"),
        ("stderr lots", "N must be a whole number"),
        ("suggest only a title", "expected suggest TITLE | PROMPT"),
        ("suggest | a prompt", "TITLE must not be empty"),
        ("suggest a title |  | why", "PROMPT must not be empty"),
        ("thread", "expected thread PROMPT"),
        ("wait 0", "SECONDS must be more than 0"),
        ("wait soon", "SECONDS must be a number"),
        ("wait 1 2", "expected wait [SECONDS]"),
        ("mcp", "expected mcp [SERVER/]TOOL"),
        ("mcp editor/", "expected mcp [SERVER/]TOOL [JSON], not 'editor/'"),
        ("mcp /shout", "expected mcp [SERVER/]TOOL [JSON], not '/shout'"),
        ("mcp thread_status {oops", "JSON is not valid JSON"),
        ('mcp thread_status ["t-1"]', "JSON must be an object, not list"),
    ],
)
def test_malformed_arguments_are_syntax_errors(line: str, reason: str) -> None:
    with pytest.raises(ScriptSyntaxError) as caught:
        parse_prompt(f"say first\n{line}")
    assert caught.value.line == 2
    assert reason in str(caught.value)


# --- end to end: the real agent process --------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def state_flag(tmp_path: Path) -> tuple[str, str]:
    return ("--state-dir", str(tmp_path / "state"))


@pytest.fixture
def client() -> RecordingClient:
    return RecordingClient()


async def new_session(agent: RunningAgent, cwd: Path) -> str:
    async with asyncio.timeout(TIMEOUT):
        response = await agent.conn.new_session(cwd=str(cwd))
    return response.session_id


async def prompt(agent: RunningAgent, session_id: str, text: str) -> PromptResponse:
    async with asyncio.timeout(TIMEOUT):
        return await agent.conn.prompt(session_id=session_id, prompt=[text_block(text)])


async def prompt_error(agent: RunningAgent, session_id: str, text: str) -> RequestError:
    with pytest.raises(RequestError) as caught:
        await prompt(agent, session_id, text)
    return caught.value


def is_message(text: str) -> Any:
    def check(update: Any) -> bool:
        return isinstance(update, AgentMessageChunk) and text in getattr(update.content, "text", "")

    return check


def plan_statuses(update: AgentPlanUpdate) -> list[tuple[str, str]]:
    return [(entry.content, entry.status) for entry in update.entries]


def chunk_text(update: Any) -> str:
    assert isinstance(update.content, TextContentBlock)
    return update.content.text


async def test_initialize_and_new_session_advertise_everything(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        capabilities = agent.initialized.agent_capabilities
        assert capabilities is not None
        assert capabilities.load_session is True
        sessions = capabilities.session_capabilities
        assert sessions is not None
        assert None not in (sessions.list, sessions.resume, sessions.close, sessions.fork)
        assert agent.initialized.agent_info is not None
        assert agent.initialized.agent_info.name == "sessiond-demo-agent"

        async with asyncio.timeout(TIMEOUT):
            response = await agent.conn.new_session(cwd=str(workdir))
        assert response.modes is not None
        assert response.modes.current_mode_id == "default"
        assert [mode.id for mode in response.modes.available_modes] == ["default", "plan"]
        assert response.config_options is not None
        (model,) = response.config_options
        assert model.id == "model"
        assert model.category == "model"
        assert model.current_value == "demo-small"


async def test_script_updates_arrive_in_script_order(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    script = "\n".join(
        [
            "plan Look | Change | Check",
            "progress 1 in_progress",
            "think pondering",
            "say one",
            "say two",
            "progress 1 completed",
            "usage 1500 100000 0.25",
            "tokens 11 22",
        ]
    )
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        response = await prompt(agent, session_id, script)

    assert response.stop_reason == "end_turn"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (
        11,
        22,
        33,
    )
    updates = client.updates_of(session_id)
    assert [type(update) for update in updates] == [
        AgentPlanUpdate,
        AgentPlanUpdate,
        AgentThoughtChunk,
        AgentMessageChunk,
        AgentMessageChunk,
        AgentPlanUpdate,
        UsageUpdate,
    ]
    assert plan_statuses(updates[0]) == [("Look", "pending"), ("Change", "pending"), ("Check", "pending")]
    assert all(entry.priority == "medium" for entry in updates[0].entries)
    assert plan_statuses(updates[1])[0] == ("Look", "in_progress")
    assert chunk_text(updates[2]) == "pondering"
    assert [chunk_text(updates[3]), chunk_text(updates[4])] == ["one", "\ntwo"]
    assert plan_statuses(updates[5])[0] == ("Look", "completed")
    usage = updates[6]
    assert (usage.used, usage.size) == (1500, 100000)
    assert usage.cost is not None
    assert (usage.cost.amount, usage.cost.currency) == (0.25, "USD")
    assert client.reply(session_id) == "one\ntwo"


async def test_prose_gets_a_plan_a_reply_and_an_estimated_usage(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        first = await prompt(agent, session_id, "Hello agent, how are you?")
        first_reply = client.reply(session_id)
        first_usage = client.updates_of(session_id)[-1]
        plans = [plan_statuses(u) for u in client.updates_of(session_id) if isinstance(u, AgentPlanUpdate)]
        client.clear()
        await prompt(agent, session_id, "say more")
        second_usage = client.updates_of(session_id)[-1]

    assert first.stop_reason == "end_turn"
    assert first_reply.startswith("You said: Hello agent, how are you?\n")
    assert [[status for _, status in plan] for plan in plans] == [
        ["in_progress", "pending", "pending"],
        ["completed", "in_progress", "pending"],
        ["completed", "completed", "in_progress"],
        ["completed", "completed", "completed"],
    ]
    assert [entry for entry, _ in plans[0]] == ["Read the prompt", "Think", "Answer"]
    # usage: characters of every prompt and reply so far / 4, at $0.000003 a token
    assert isinstance(first_usage, UsageUpdate)
    expected = (len("Hello agent, how are you?") + len(first_reply)) // 4
    assert (first_usage.used, first_usage.size) == (expected, 200000)
    assert first_usage.cost is not None
    assert first_usage.cost.amount == pytest.approx(expected * 0.000003)
    assert isinstance(second_usage, UsageUpdate)
    assert (
        second_usage.used == (len("Hello agent, how are you?") + len(first_reply) + len("say more") + 4) // 4
    )


async def test_file_commands_go_through_the_client_with_diff_tool_calls(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    target = workdir / "notes.txt"
    script = "\n".join(
        [
            r"write sub/../notes.txt first\nsecond",
            r"append notes.txt \nthird",
            "edit notes.txt second => 2nd",
            "edit notes.txt missing => x",
            "read notes.txt",
            "read absent.txt",
            "say done",
        ]
    )
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        response = await prompt(agent, session_id, script)

    assert response.stop_reason == "end_turn"
    assert target.read_text() == "first\n2nd\nthird"
    updates = client.updates_of(session_id)
    starts = [u for u in updates if isinstance(u, ToolCallStart)]
    finals = [u for u in updates if isinstance(u, ToolCallProgress) and u.status is not None]
    assert [(s.title, s.kind, s.status) for s in starts] == [
        ("Write sub/../notes.txt", "edit", "in_progress"),
        ("Append to notes.txt", "edit", "in_progress"),
        ("Edit notes.txt", "edit", "in_progress"),
        ("Edit notes.txt", "edit", "in_progress"),
        ("Read notes.txt", "read", "in_progress"),
        ("Read absent.txt", "read", "in_progress"),
    ]
    assert [f.status for f in finals] == [
        "completed",
        "completed",
        "completed",
        "failed",
        "completed",
        "failed",
    ]
    assert [s.tool_call_id for s in starts] == [f.tool_call_id for f in finals]

    write, append = starts[0], starts[1]
    assert write.locations is not None
    assert write.locations[0].path == str(target)
    assert write.content is not None
    (diff,) = write.content
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff",
        str(target),
        None,
        "first\nsecond",
    )
    assert append.content is not None
    (diff,) = append.content
    assert (diff.old_text, diff.new_text) == ("first\nsecond", "first\nsecond\nthird")
    assert finals[2].content is not None
    (diff,) = finals[2].content
    assert (diff.old_text, diff.new_text) == ("first\nsecond\nthird", "first\n2nd\nthird")

    assert client.reply(session_id) == "\n".join(
        [
            "Edit notes.txt failed: 'missing' is not in notes.txt",
            "notes.txt has 3 lines. First line: first",
            f"Read absent.txt failed: Resource not found (uri: {workdir / 'absent.txt'})",
            "done",
        ]
    )


async def test_client_errors_fail_the_tool_call_and_the_script_goes_on(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        response = await prompt(agent, session_id, "write refused.txt nope\nsay still here")

    assert response.stop_reason == "end_turn"
    assert not (workdir / "refused.txt").exists()
    final = [u for u in client.updates_of(session_id) if isinstance(u, ToolCallProgress)][-1]
    assert final.status == "failed"
    assert final.raw_output == {"error": "writing refused.txt is not allowed"}
    assert (
        client.reply(session_id) == "Write refused.txt failed: writing refused.txt is not allowed\nstill here"
    )


async def test_client_without_fs_or_terminal_is_not_asked(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag, capabilities=ClientCapabilities()) as agent:
        session_id = await new_session(agent, workdir)
        await prompt(agent, session_id, "write a.txt x\nrun echo hi")

    assert not (workdir / "a.txt").exists()
    assert client.terminal_requests == []
    assert client.reply(session_id) == (
        "Write a.txt failed: the client does not offer fs/write_text_file\n"
        "Run echo hi failed: the client does not offer terminal/create"
    )


async def test_run_uses_the_client_terminal_and_reports_the_exit_code(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        await prompt(agent, session_id, "run sh -c 'pwd; echo oops; exit 3'\nrun echo hello   world")

    assert client.terminal_requests == [
        {
            "command": "sh",
            "args": ["-c", "pwd; echo oops; exit 3"],
            "cwd": str(workdir),
            "output_byte_limit": 65536,
        },
        {"command": "echo", "args": ["hello", "world"], "cwd": str(workdir), "output_byte_limit": 65536},
    ]
    assert client.released_terminals == ["term-1", "term-2"]
    assert client.reply(session_id) == (
        f"Ran sh -c 'pwd; echo oops; exit 3': exit code 3\n{workdir}\noops\n"
        "Ran echo hello world: exit code 0\nhello world"
    )
    updates = client.updates_of(session_id)
    starts = [u for u in updates if isinstance(u, ToolCallStart)]
    assert [(s.kind, s.status) for s in starts] == [("execute", "in_progress"), ("execute", "in_progress")]
    finals = [u for u in updates if isinstance(u, ToolCallProgress) and u.status is not None]
    assert [f.status for f in finals] == ["failed", "completed"]
    assert finals[0].content is not None
    assert [(c.type, c.terminal_id) for c in finals[0].content] == [("terminal", "term-1")]
    assert finals[0].raw_output == {
        "exitCode": 3,
        "signal": None,
        "output": f"{workdir}\noops\n",
        "truncated": False,
    }


async def test_shell_runs_the_command_itself_and_only_then_reports_it(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        await prompt(
            agent,
            session_id,
            "shell sh -c 'pwd > where.txt; echo oops >&2; exit 3'\nshell no-such-command-here",
        )

    assert client.terminal_requests == []  # not the client's terminal: its own process
    assert (workdir / "where.txt").read_text() == f"{workdir}\n"
    assert client.reply(session_id) == (
        "Ran sh -c 'pwd > where.txt; echo oops >&2; exit 3' itself: exit code 3\noops\n"
        "Shell no-such-command-here failed: cannot start no-such-command-here: No such file or directory"
    )
    updates = client.updates_of(session_id)
    # Each told of once, ended: no start before it, no update after it.
    calls = [u for u in updates if isinstance(u, ToolCallStart | ToolCallProgress)]
    assert [(type(c), c.kind, c.status, c.title) for c in calls] == [
        (ToolCallStart, "execute", "failed", "Shell sh -c 'pwd > where.txt; echo oops >&2; exit 3'"),
        (ToolCallStart, "execute", "failed", "Shell no-such-command-here"),
    ]
    assert calls[0].raw_output == {"exitCode": 3, "output": "oops\n", "truncated": False}
    assert calls[1].raw_output == {"error": "cannot start no-such-command-here: No such file or directory"}


async def test_cancel_kills_a_command_the_agent_runs_itself(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        turn = asyncio.create_task(
            prompt(agent, session_id, "say before\nshell sh -c 'echo $$ > pid; exec sleep 120'")
        )
        await client.wait_for_update(is_message("before"))
        pid_file = workdir / "pid"
        await _until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        pid = int(pid_file.read_text())
        await agent.conn.cancel(session_id=session_id)
        async with asyncio.timeout(30):  # far less than the 120 s the command would run
            response = await turn
        assert response.stop_reason == "cancelled"
        await _until(lambda: not _running(pid))


async def _until(check: Callable[[], bool]) -> None:
    """Poll a file system check (nothing signals these) for up to 30 s."""
    async with asyncio.timeout(30):
        while True:
            if check():
                return
            await asyncio.sleep(0.02)


def _running(pid: int) -> bool:
    """Whether the process runs (a zombie, killed and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_ask_round_trips_a_permission_request(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    replies = []
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        for answer in ("allow_once", "reject_once", "cancelled"):
            client.clear()
            client.permission_mode = answer
            await prompt(agent, session_id, "ask Deploy to production?")
            replies.append(client.reply(session_id))

    assert replies == [
        'Asked "Deploy to production?": Allow',
        'Asked "Deploy to production?": Reject',
        'Asked "Deploy to production?": cancelled',
    ]
    request = client.permission_requests[0]
    assert request.tool_call.title == "Deploy to production?"
    assert [(o.option_id, o.name, o.kind) for o in request.options] == [
        ("allow_once", "Allow", "allow_once"),
        ("reject_once", "Reject", "reject_once"),
    ]


@pytest.mark.parametrize("waiting", ["sleep 60", "hang", "ask Go?", "run sleep 60"])
async def test_cancel_stops_the_script_where_it_waits(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str], waiting: str
) -> None:
    client.permission_mode = "wait"
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        turn = asyncio.create_task(prompt(agent, session_id, f"say before\n{waiting}\nsay after"))
        await client.wait_for_update(is_message("before"))
        if waiting.startswith("ask"):
            await client.permission_asked.wait()
        if waiting.startswith("run"):
            await client.wait_for_update(lambda u: isinstance(u, ToolCallProgress) and u.content is not None)
        await agent.conn.cancel(session_id=session_id)
        async with asyncio.timeout(10):  # far less than the 60 s the script would wait
            response = await turn
        assert response.stop_reason == "cancelled"
        assert client.reply(session_id) == "before"

        # The session carries on after a cancel.
        client.clear()
        assert (await prompt(agent, session_id, "say again")).stop_reason == "end_turn"
        assert client.reply(session_id) == "again"

    if waiting.startswith("run"):
        assert client.killed_terminals == ["term-1"]
        assert client.released_terminals == ["term-1"]


async def test_a_second_prompt_while_one_runs_is_refused(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        turn = asyncio.create_task(prompt(agent, session_id, "say started\nhang"))
        await client.wait_for_update(is_message("started"))
        error = await prompt_error(agent, session_id, "say too")
        assert error.code == -32600
        await agent.conn.cancel(session_id=session_id)
        assert (await turn).stop_reason == "cancelled"


async def test_fail_ends_the_turn_with_the_message_intact(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    message = 'Disk full: /var/tmp (errno 28) — "quoted" ünïcode'
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        error = await prompt_error(agent, session_id, f"say partial\nfail {message}\nsay never")
        assert (error.code, str(error), error.data) == (-32603, message, {"details": message})
        assert client.reply(session_id) == "partial"
        assert isinstance(client.updates_of(session_id)[-1], UsageUpdate)
        assert (await prompt(agent, session_id, "echo fine")).stop_reason == "end_turn"


async def test_script_errors_name_the_line(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        error = await prompt_error(agent, session_id, "say hi\n\nfrob the widget")
        assert error.code == -32602
        assert str(error).startswith("line 3: unknown command 'frob'; commands are: say, think, plan")
        assert error.data == {"line": 3, "text": "frob the widget", "commands": list(COMMANDS)}
        assert client.updates_of(session_id) == []  # a bad script does nothing at all

        error = await prompt_error(agent, session_id, "plan A | B\nprogress 3 completed")
        assert (error.code, str(error)) == (-32602, "line 2: progress 3: the plan has 2 entries")

        await prompt(agent, session_id, "history")
        assert client.reply(session_id).endswith("1. plan A | B\\nprogress 3 completed")


async def test_crash_exits_the_process_with_the_code(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        with pytest.raises(ConnectionError):
            await prompt(agent, session_id, "say going down\ncrash 7")
        async with asyncio.timeout(TIMEOUT):
            assert await agent.process.wait() == 7
        assert client.reply(session_id) == "going down"


async def test_large_stderr_does_not_stall_a_drained_agent(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        await prompt(agent, session_id, "stderr 200000\nsay done")
        assert client.reply(session_id) == "done"
    assert agent.stderr.count(b"demo agent stderr filler") >= 200000 // 60
    assert len(agent.stderr) >= 200000


async def test_history_survives_close_resume_and_a_restart_with_load(
    workdir: Path, state_flag: tuple[str, str]
) -> None:
    first_client = RecordingClient()
    async with running_agent(first_client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        await prompt(agent, session_id, "say first")
        await prompt(agent, session_id, "echo second\nsay line")
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.close_session(session_id=session_id)
        error = await prompt_error(agent, session_id, "say closed")
        assert error.code == -32002

        first_client.clear()
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.resume_session(session_id=session_id, cwd=str(workdir))
        assert first_client.updates_of(session_id) == []  # resume does not replay
        await prompt(agent, session_id, "history")
        assert first_client.reply(session_id) == "1. say first\n2. echo second\\nsay line"

    second_client = RecordingClient()
    async with running_agent(second_client, *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.load_session(session_id=session_id, cwd=str(workdir))
        replay = [
            (type(update).__name__, chunk_text(update))
            for update in second_client.updates_of(session_id)
            if isinstance(update, UserMessageChunk | AgentMessageChunk)
        ]
        assert replay == [
            ("UserMessageChunk", "say first"),
            ("AgentMessageChunk", "first"),
            ("UserMessageChunk", "echo second\nsay line"),
            ("AgentMessageChunk", "second\nline"),
            ("UserMessageChunk", "history"),
            ("AgentMessageChunk", "1. say first\n2. echo second\\nsay line"),
        ]
        second_client.clear()
        await prompt(agent, session_id, "history")
        assert second_client.reply(session_id).splitlines()[-1] == "3. history"


async def test_fork_copies_history_and_settings_but_not_later_turns(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        parent = await new_session(agent, workdir)
        await prompt(agent, parent, "say in the parent")
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.set_config_option(config_id="model", session_id=parent, value="demo-large")
            forked = await agent.conn.fork_session(session_id=parent, cwd=str(workdir))
        child = forked.session_id
        assert child != parent
        await prompt(agent, child, "history\nmodel")
        assert client.reply(child) == "1. say in the parent\nModel: demo-large. Mode: default."
        client.clear()
        await prompt(agent, parent, "history")
        assert client.reply(parent) == "1. say in the parent"


async def test_list_filters_stored_sessions_by_cwd(
    client: RecordingClient, tmp_path: Path, state_flag: tuple[str, str]
) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    async with running_agent(client, *state_flag) as agent:
        one = await new_session(agent, here)
        two = await new_session(agent, here)
        three = await new_session(agent, there)
        await prompt(agent, one, "# title comes from here\nsay titled")
        async with asyncio.timeout(TIMEOUT):
            listed_here = await agent.conn.list_sessions(cwd=str(here))
            listed_all = await agent.conn.list_sessions()

    assert {info.session_id for info in listed_here.sessions} == {one, two}
    assert {info.session_id for info in listed_all.sessions} == {one, two, three}
    titles = {info.session_id: info.title for info in listed_here.sessions}
    assert titles == {one: "# title comes from here", two: None}
    assert all(info.cwd == str(here) and info.updated_at for info in listed_here.sessions)


async def test_flags_withdraw_capabilities(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    flags = ("--no-load", "--no-resume", "--no-close", "--no-fork", "--no-list")
    async with running_agent(client, *state_flag, *flags) as agent:
        capabilities = agent.initialized.agent_capabilities
        assert capabilities is not None
        assert not capabilities.load_session
        sessions = capabilities.session_capabilities
        assert (
            sessions is None or (sessions.list, sessions.resume, sessions.close, sessions.fork) == (None,) * 4
        )

        session_id = await new_session(agent, workdir)
        assert (await prompt(agent, session_id, "say still works")).stop_reason == "end_turn"
        calls = {
            "session/load": agent.conn.load_session(session_id=session_id, cwd=str(workdir)),
            "session/resume": agent.conn.resume_session(session_id=session_id, cwd=str(workdir)),
            "session/close": agent.conn.close_session(session_id=session_id),
            "session/fork": agent.conn.fork_session(session_id=session_id, cwd=str(workdir)),
            "session/list": agent.conn.list_sessions(),
        }
        for method, call in calls.items():
            with pytest.raises(RequestError) as caught:
                async with asyncio.timeout(TIMEOUT):
                    await call
            assert (caught.value.code, caught.value.data) == (-32601, {"method": method})


async def test_unknown_sessions_are_named_in_the_error(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        for missing in ("demo-nope", "../../etc/passwd"):
            calls = [
                agent.conn.prompt(session_id=missing, prompt=[text_block("say hi")]),
                agent.conn.load_session(session_id=missing, cwd=str(workdir)),
                agent.conn.resume_session(session_id=missing, cwd=str(workdir)),
                agent.conn.fork_session(session_id=missing, cwd=str(workdir)),
                agent.conn.close_session(session_id=missing),
                agent.conn.set_session_mode(session_id=missing, mode_id="plan"),
            ]
            for call in calls:
                with pytest.raises(RequestError) as caught:
                    async with asyncio.timeout(TIMEOUT):
                        await call
                assert caught.value.code == -32002
                assert missing in str(caught.value)


async def test_model_and_mode_are_settable_and_persist(workdir: Path, state_flag: tuple[str, str]) -> None:
    client = RecordingClient()
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        async with asyncio.timeout(TIMEOUT):
            changed = await agent.conn.set_config_option(
                config_id="model", session_id=session_id, value="demo-large"
            )
            await agent.conn.set_session_mode(session_id=session_id, mode_id="plan")
        assert changed.config_options[0].current_value == "demo-large"
        await prompt(agent, session_id, "model")
        assert client.reply(session_id) == "Model: demo-large. Mode: plan."
        for bad in (
            agent.conn.set_config_option(config_id="model", session_id=session_id, value="gpt-9"),
            agent.conn.set_config_option(config_id="colour", session_id=session_id, value="red"),
            agent.conn.set_session_mode(session_id=session_id, mode_id="yolo"),
        ):
            with pytest.raises(RequestError) as caught:
                async with asyncio.timeout(TIMEOUT):
                    await bad
            assert caught.value.code == -32602

    async with running_agent(RecordingClient(), *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            loaded = await agent.conn.load_session(session_id=session_id, cwd=str(workdir))
        assert loaded.modes is not None
        assert loaded.modes.current_mode_id == "plan"
        assert loaded.config_options is not None
        assert loaded.config_options[0].current_value == "demo-large"


async def test_state_dir_comes_from_the_environment(
    client: RecordingClient, workdir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "from-env"
    async with running_agent(client, env={"SESSIOND_DEMO_STATE": str(state)}) as agent:
        session_id = await new_session(agent, workdir)
        await prompt(agent, session_id, "say stored")
    stored = json.loads((state / f"{session_id}.json").read_text())
    assert stored["session_id"] == session_id
    assert stored["cwd"] == str(workdir)
    assert [turn["prompt"] for turn in stored["turns"]] == ["say stored"]
    assert os.listdir(state) == [f"{session_id}.json"]  # no temporary files left behind


async def test_agent_exits_cleanly_when_the_client_goes_away_mid_turn(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        session_id = await new_session(agent, workdir)
        turn = asyncio.create_task(prompt(agent, session_id, "say waiting\nrun sleep 60"))
        await client.wait_for_update(lambda u: isinstance(u, ToolCallProgress) and u.content is not None)
    # Leaving the block closed the agent's stdin; the SDK would have terminated
    # it (exit status -15) had it not exited by itself within 2 s.
    with pytest.raises(ConnectionError):
        await turn
    assert agent.process.returncode == 0
    assert b"Traceback" not in agent.stderr, agent.stderr.decode()

    async with running_agent(RecordingClient(), *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.resume_session(session_id=session_id, cwd=str(workdir))
        await prompt(agent, session_id, "history")
        assert agent.client.reply(session_id) == "1. say waiting\\nrun sleep 60"


async def test_one_process_runs_many_sessions_at_once(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str]
) -> None:
    async with running_agent(client, *state_flag) as agent:
        sessions = [await new_session(agent, workdir) for _ in range(5)]
        turns = [
            asyncio.create_task(prompt(agent, session_id, f"say started {n}\nhang"))
            for n, session_id in enumerate(sessions)
        ]
        # Every session is inside its turn at the same time.
        for n in range(5):
            await client.wait_for_update(is_message(f"started {n}"))
        for session_id in sessions:
            await agent.conn.cancel(session_id=session_id)
        responses = await asyncio.gather(*turns)

    assert [response.stop_reason for response in responses] == ["cancelled"] * 5
    assert [client.reply(session_id) for session_id in sessions] == [f"started {n}" for n in range(5)]


# --- in-process: the store behind list, load and resume ------------------------------------


async def test_list_pages_through_many_sessions(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    for n in range(150):
        store.save(SessionRecord(session_id=f"s{n:03}", cwd="/w", model="demo-small", mode="default"))
    agent = DemoAgent(AgentOptions(state_dir=tmp_path))

    first = await agent.list_sessions()
    second = await agent.list_sessions(cursor=first.next_cursor)

    assert (len(first.sessions), first.next_cursor) == (100, "100")
    assert (len(second.sessions), second.next_cursor) == (50, None)
    assert len({info.session_id for info in [*first.sessions, *second.sessions]}) == 150
    with pytest.raises(RequestError) as caught:
        await agent.list_sessions(cursor="abc")
    assert caught.value.code == -32602


async def test_a_corrupt_session_file_is_skipped_by_list_and_named_by_load(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.save(SessionRecord(session_id="good", cwd="/w", model="demo-small", mode="default"))
    (tmp_path / "bad.json").write_text("{not json")
    agent = DemoAgent(AgentOptions(state_dir=tmp_path))

    assert [info.session_id for info in (await agent.list_sessions()).sessions] == ["good"]
    with pytest.raises(RequestError) as caught:
        await agent.resume_session(session_id="bad", cwd="/w")
    assert caught.value.code == -32603
    assert caught.value.data is not None
    assert "bad.json" in caught.value.data["details"]


# --- the sessiond MCP server: suggest, thread, wait, mcp -----------------------------------------


@pytest.fixture
def fake_socket() -> Iterator[Path]:
    """A short socket path for the stand-in daemon (a unix socket's path must stay under 108 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="sd-demo-", dir="/tmp"))
    yield directory / "d.sock"
    shutil.rmtree(directory, ignore_errors=True)


def sessiond_server(env: dict[str, str], name: str = "sessiond") -> McpServerStdio:
    """The MCP bridge, as the daemon offers it in `mcpServers`."""
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=["-m", "sessiond.client.mcp_bridge"],
        env=[EnvVariable(name=key, value=value) for key, value in env.items()],
    )


async def test_scripts_suggest_tasks_and_start_and_wait_for_threads_through_mcp(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str], fake_socket: Path
) -> None:
    async with FakeSessiond(fake_socket) as daemon, running_agent(client, *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            response = await agent.conn.new_session(
                cwd=str(workdir), mcp_servers=[sessiond_server(daemon.env)]
            )
        session_id = response.session_id
        await prompt(
            agent,
            session_id,
            "suggest Fix the flaky test | make tests pass | it failed twice\n"
            r"thread say hello\nsay again" + "\nthread say bye\nwait",
        )
        assert client.reply(session_id) == (
            "Suggested task task-1: Fix the flaky test\n"
            "Started thread thread-1\n"
            "Started thread thread-2\n"
            "thread-1 idle: report of say hello\n"
            "thread-2 idle: report of say bye"
        )
        starts = [u for u in client.updates_of(session_id) if isinstance(u, ToolCallStart)]
        assert [(u.title, u.kind) for u in starts] == [
            ('Suggest task "Fix the flaky test"', "other"),
            ('Start thread "say hello"', "other"),
            ('Start thread "say bye"', "other"),
            ("Wait for 2 threads", "other"),
        ]
        assert starts[0].raw_input == {
            "server": "sessiond",
            "tool": "suggest_task",
            "arguments": {
                "title": "Fix the flaky test",
                "prompt": "make tests pass",
                "why": "it failed twice",
            },
        }
        ends = [u for u in client.updates_of(session_id) if isinstance(u, ToolCallProgress) and u.status]
        assert [u.status for u in ends] == ["completed"] * 4
        assert ends[0].raw_output == {
            "task": "task-1", "status": "suggested", "title": "Fix the flaky test", "agent": "demo"
        }  # fmt: skip
        assert daemon.params_of("thread/start")[0]["prompt"] == "say hello\nsay again"

        # The session remembers its threads; the server it started is kept for the session's life.
        client.clear()
        await prompt(agent, session_id, 'wait 5\nmcp thread_status {"id": "thread-2"}')
        report = {
            "thread": "thread-2",
            "status": "idle",
            "done": True,
            "reply": "report of say bye\nsecond line",
        }
        assert client.reply(session_id).split("\n", 2) == [
            "thread-1 idle: report of say hello",
            "thread-2 idle: report of say bye",
            json.dumps(report, separators=(", ", ": ")),  # the tool's JSON, as it answered it
        ]
        assert daemon.params_of("thread/wait")[-1] == {"threads": ["thread-1", "thread-2"], "timeout": 5.0}
        assert daemon.connections == 1  # one bridge, one connection to the daemon, across turns
        stored = SessionStore(Path(state_flag[1])).load(session_id)
        assert stored is not None
        assert stored.threads == ["thread-1", "thread-2"]

        # Closing the session stops its server (which says goodbye to the daemon).
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.close_session(session_id=session_id)
            await daemon.goodbye.wait()
        assert daemon.goodbyes == 1


async def test_mcp_tool_errors_are_said_and_the_script_goes_on(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str], fake_socket: Path
) -> None:
    async with FakeSessiond(fake_socket) as daemon, running_agent(client, *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            response = await agent.conn.new_session(
                cwd=str(workdir), mcp_servers=[sessiond_server(daemon.env)]
            )
        session_id = response.session_id
        await prompt(
            agent,
            session_id,
            "thread an unknown parent\n"
            'mcp thread_status {"id": "thread-7"}\n'
            "mcp no_such_tool\n"
            "wait\n"
            "say done",
        )
        lines = client.reply(session_id).split("\n")
        assert lines[0] == "Start thread \"an unknown parent\" failed: no session 'nope': it was never opened"
        assert lines[1] == "Call sessiond thread_status failed: no thread 'thread-7'"
        assert lines[2].startswith("Call sessiond no_such_tool failed: ")
        assert "no_such_tool" in lines[2]
        assert lines[3:] == ["No threads to wait for.", "done"]
        failed = [
            u
            for u in client.updates_of(session_id)
            if isinstance(u, ToolCallProgress) and u.status == "failed"
        ]
        assert len(failed) == 3
        assert failed[0].raw_output == {"error": "no session 'nope': it was never opened"}
    # When the agent exits, the servers its sessions started are stopped too.
    async with asyncio.timeout(TIMEOUT):
        await daemon.goodbye.wait()


async def test_cancelling_a_turn_that_waits_for_threads_cancels_the_wait_at_the_daemon(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str], fake_socket: Path
) -> None:
    async with FakeSessiond(fake_socket) as daemon, running_agent(client, *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            response = await agent.conn.new_session(
                cwd=str(workdir), mcp_servers=[sessiond_server(daemon.env)]
            )
        session_id = response.session_id
        await prompt(agent, session_id, "thread hang until cancelled")
        turn = asyncio.create_task(prompt(agent, session_id, "say before\nwait\nsay after"))
        async with asyncio.timeout(TIMEOUT):
            await daemon.arrival("thread/wait")
        await agent.conn.cancel(session_id=session_id)
        async with asyncio.timeout(TIMEOUT):
            ended = await turn
            await daemon.cancel_seen.wait()  # MCP's cancel reached the bridge, which told the daemon
        assert ended.stop_reason == "cancelled"
        assert client.reply(session_id).endswith("before")
        assert daemon.cancelled == ["thread/wait"]

        # The server and its connection carry on.
        client.clear()
        await prompt(agent, session_id, "suggest T | P")
        assert client.reply(session_id) == "Suggested task task-1: T"
        assert daemon.connections == 1


async def test_a_session_without_the_sessiond_server_is_told_so(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str], fake_socket: Path
) -> None:
    async with running_agent(client, *state_flag) as agent:
        plain = await new_session(agent, workdir)
        async with asyncio.timeout(TIMEOUT):
            other = await agent.conn.new_session(
                cwd=str(workdir), mcp_servers=[sessiond_server({}, name="elsewhere")]
            )
        for session_id in (plain, other.session_id):
            await prompt(
                agent, session_id, "suggest T | P\nthread say hi\nmcp thread_status {}\nsay still here"
            )
            assert client.reply(session_id).split("\n") == [
                'Suggest task "T" failed: no MCP server named sessiond was given to this session',
                'Start thread "say hi" failed: no MCP server named sessiond was given to this session',
                "Call sessiond thread_status failed: no MCP server named sessiond was given to this session",
                "still here",
            ]


async def test_a_server_that_cannot_start_fails_the_step_and_a_fork_starts_no_threads(
    client: RecordingClient, workdir: Path, state_flag: tuple[str, str], fake_socket: Path
) -> None:
    broken = McpServerStdio(
        name="sessiond", command=sys.executable, args=["-m", "sessiond.client.mcp_bridge"], env=[]
    )
    async with FakeSessiond(fake_socket) as daemon, running_agent(client, *state_flag) as agent:
        async with asyncio.timeout(TIMEOUT):
            response = await agent.conn.new_session(cwd=str(workdir), mcp_servers=[broken])
        session_id = response.session_id
        await prompt(agent, session_id, "thread say hi\nsay on")
        reply = client.reply(session_id).split("\n")
        assert reply[0].startswith('Start thread "say hi" failed: could not start the MCP server sessiond')
        assert reply[1] == "on"

        # Resume with a working server: the session uses it from then on.
        async with asyncio.timeout(TIMEOUT):
            await agent.conn.resume_session(
                session_id=session_id, cwd=str(workdir), mcp_servers=[sessiond_server(daemon.env)]
            )
        client.clear()
        await prompt(agent, session_id, "thread say hi")
        assert client.reply(session_id) == "Started thread thread-1"

        async with asyncio.timeout(TIMEOUT):
            forked = await agent.conn.fork_session(
                session_id=session_id, cwd=str(workdir), mcp_servers=[sessiond_server(daemon.env)]
            )
        await prompt(agent, forked.session_id, "wait")
        assert client.reply(forked.session_id) == "No threads to wait for."
