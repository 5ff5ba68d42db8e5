"""Carrying out one prompt turn: a parsed script (or prose) against the ACP client.

Every notification is awaited before the next step starts, so the client sees
them in script order. Failures of the client's fs/terminal methods fail the tool
call and are said in the reply; the script then goes on. Only `fail`, a broken
`progress` and a lost connection end the turn early.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar, assert_never

from acp import RequestError
from acp.helpers import (
    ToolCallContentVariant,
    plan_entry,
    start_tool_call,
    tool_diff_content,
    tool_terminal_ref,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    ClientCapabilities,
    Cost,
    CurrentModeUpdate,
    PermissionOption,
    SessionInfoUpdate,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    Usage,
    UsageUpdate,
)

from .mcp_tools import SESSIOND_SERVER, McpError, SessionMcp, no_server_message
from .script import (
    Action,
    Ask,
    CallMcpTool,
    Crash,
    Echo,
    EditFile,
    Fail,
    Hang,
    NameSession,
    PlanStatus,
    Progress,
    Prose,
    ReadFile,
    ReportUsage,
    RunCommand,
    Say,
    Script,
    SetPlan,
    ShellCommand,
    ShowHistory,
    ShowModel,
    Sleep,
    StartThread,
    Step,
    SuggestTask,
    SwitchMode,
    Think,
    TurnTokens,
    WaitThreads,
    WriteFile,
    WriteStderr,
)
from .state import PlanItem, SessionRecord

OUTPUT_BYTE_LIMIT = 64 * 1024
CONTEXT_WINDOW = 200_000
USD_PER_TOKEN = 0.000003
CHARS_PER_TOKEN = 4
# Cleanup after a cancel talks to the client again; never let that hang the turn.
CLEANUP_TIMEOUT = 5.0
PROSE_PLAN = ("Read the prompt", "Think", "Answer")
PROSE_HINT = (
    "(I am the sessiond demo agent. Start a line with a command such as say, plan, write or run "
    "to script me; see docs/demo-agent.md.)"
)
ALLOW_OPTION = PermissionOption(option_id="allow_once", name="Allow", kind="allow_once")
REJECT_OPTION = PermissionOption(option_id="reject_once", name="Reject", kind="reject_once")
_STDERR_FILLER = b"demo agent stderr filler: the daemon must drain this pipe\n"

SessionUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | AgentPlanUpdate
    | ToolCallStart
    | ToolCallProgress
    | UsageUpdate
    | CurrentModeUpdate
    | SessionInfoUpdate
)
T = TypeVar("T")


class StepFailed(Exception):
    """An expected failure of one step (a client error, a missing file): said, then the script goes on."""


class ScriptRuntimeError(Exception):
    """A script that cannot go on (`progress` of an entry the plan lacks): ends the turn with an error."""

    def __init__(self, step: Step, reason: str) -> None:
        super().__init__(f"line {step.line}: {reason}")
        self.step = step


def estimated_usage(record: SessionRecord) -> UsageUpdate:
    """Context fill estimated from the characters of every prompt and reply so far."""
    used = record.context_chars() // CHARS_PER_TOKEN
    return usage_update(used, CONTEXT_WINDOW, used * USD_PER_TOKEN)


def estimated_tokens(record: SessionRecord, reply: str) -> Usage:
    """A turn's tokens estimated as its context fill is, once the turn is recorded: in, the
    session's prompts and replies up to this reply; out, the reply."""
    output_tokens = len(reply) // CHARS_PER_TOKEN
    input_tokens = record.context_chars() // CHARS_PER_TOKEN - output_tokens
    total_tokens = input_tokens + output_tokens
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total_tokens)


def usage_update(used: int, size: int, cost: float | None) -> UsageUpdate:
    return UsageUpdate(
        session_update="usage_update",
        used=used,
        size=size,
        cost=Cost(amount=cost, currency="USD") if cost is not None else None,
    )


def describe_error(exc: RequestError) -> str:
    """The client's error message, with what its `data` adds (generic messages say little alone)."""
    message = str(exc)
    data = exc.data
    if not isinstance(data, dict) or not data:
        return message
    details = data.get("details")
    if isinstance(details, str):
        return message if details in message else f"{message}: {details}"
    return f"{message} ({', '.join(f'{key}: {value}' for key, value in data.items())})"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass
class ToolCallResult:
    """What the body of a tool call reports; sent when the body finishes."""

    call_id: str
    status: ToolCallStatus = "completed"
    content: list[ToolCallContentVariant] | None = None
    raw_output: Any = None
    reply: str | None = None  # said after the tool call's final update


@dataclass
class Turn:
    """One prompt turn of one session. The agent owns it; `reply` is kept even when the turn is cut short."""

    client: Client
    client_capabilities: ClientCapabilities
    session: SessionRecord
    number: int  # 1-based turn number within the session, for tool call ids
    mcp: SessionMcp | None = None  # the session's MCP servers; None: it was given none
    reply_parts: list[str] = field(default_factory=list)
    usage_sent: bool = False
    tokens: Usage | None = None
    _tool_calls: int = 0

    @property
    def reply(self) -> str:
        return "".join(self.reply_parts)

    async def run(self, program: Script | Prose) -> None:
        if isinstance(program, Prose):
            await self._answer_prose(program.text)
            return
        for step in program.steps:
            await self._perform(step)

    # --- sending -----------------------------------------------------------

    async def _send(self, update: SessionUpdate) -> None:
        await self.client.session_update(session_id=self.session.session_id, update=update)

    async def _quietly(self, action: Awaitable[T]) -> T | None:
        """Best effort during cleanup: bounded in time, errors ignored (the connection may be gone)."""
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT):
                return await action
        except Exception:  # TimeoutError included
            return None

    async def _say(self, text: str) -> None:
        # Consecutive pieces of the reply are separated by a line break, so the
        # reply reads as one text whatever commands produced it.
        chunk = f"\n{text}" if self.reply_parts else text
        self.reply_parts.append(chunk)
        await self._send(update_agent_message_text(chunk))

    async def _send_plan(self) -> None:
        entries = [plan_entry(item.content, status=item.status) for item in self.session.plan]
        await self._send(update_plan(entries))

    def _absolute(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.session.cwd, path))

    # --- steps -------------------------------------------------------------

    async def _perform(self, step: Step) -> None:
        action: Action = step.action
        match action:
            case Say(text) | Echo(text):
                await self._say(text)
            case Think(text):
                await self._send(update_agent_thought_text(text))
            case SetPlan(entries):
                self.session.plan = [PlanItem(content=entry) for entry in entries]
                await self._send_plan()
            case Progress(number, status):
                await self._progress(step, number, status)
            case WriteFile():
                await self._write(action)
            case EditFile():
                await self._edit(action)
            case ReadFile(path):
                await self._read(path)
            case RunCommand(argv):
                await self._run(argv)
            case ShellCommand(argv):
                await self._shell(argv)
            case ReportUsage(used, size, cost):
                self.usage_sent = True
                await self._send(usage_update(used, size, cost))
            case TurnTokens(input_tokens, output_tokens):
                self.tokens = Usage(
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    total_tokens=input_tokens + output_tokens,
                )
            case Ask(title):
                await self._ask(title)
            case Sleep(seconds):
                await asyncio.sleep(seconds)
            case Hang():
                await asyncio.get_running_loop().create_future()  # only a cancel ends this
            case Fail(message):
                raise RequestError(-32603, message, {"details": message})
            case Crash(code):
                _crash(code)
            case WriteStderr(size):
                await asyncio.to_thread(_write_stderr, size)
            case ShowHistory():
                await self._say(self._history_text())
            case ShowModel():
                await self._say(f"Model: {self.session.model}. Mode: {self.session.mode}.")
            case SwitchMode(mode):
                self.session.mode = mode
                await self._send(
                    CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode)
                )
            case NameSession(title):
                await self._send(SessionInfoUpdate(session_update="session_info_update", title=title))
            case SuggestTask():
                await self._suggest(action)
            case StartThread(prompt):
                await self._start_thread(prompt)
            case WaitThreads(timeout):
                await self._wait_threads(timeout)
            case CallMcpTool(tool, arguments, server):
                await self._call_tool(server, tool, arguments)
            case _:
                assert_never(action)  # mypy fails here when a new command has no case

    async def _progress(self, step: Step, number: int, status: PlanStatus) -> None:
        plan = self.session.plan
        if number > len(plan):
            size = "1 entry" if len(plan) == 1 else f"{len(plan)} entries"
            raise ScriptRuntimeError(step, f"progress {number}: the plan has {size}")
        plan[number - 1].status = status
        await self._send_plan()

    def _history_text(self) -> str:
        if not self.session.turns:
            return "No earlier turns."
        lines = []
        for index, turn in enumerate(self.session.turns, start=1):
            # One line per turn: a multi-line prompt shows its line breaks as \n.
            prompt = turn.prompt.strip().replace("\n", "\\n")
            lines.append(f"{index}. {prompt}")
        return "\n".join(lines)

    # --- tool calls ----------------------------------------------------------

    def _next_call_id(self) -> str:
        self._tool_calls += 1
        return f"call-{self.number}-{self._tool_calls}"

    @asynccontextmanager
    async def _tool_call(
        self,
        title: str,
        kind: ToolKind,
        *,
        status: ToolCallStatus = "in_progress",
        locations: list[ToolCallLocation] | None = None,
        content: list[ToolCallContentVariant] | None = None,
        raw_input: Any = None,
    ) -> AsyncIterator[ToolCallResult]:
        """Report a tool call around its body: started, then completed or failed.

        StepFailed and client errors fail the call and are said in the reply;
        anything else (a cancel above all) fails the call and propagates.
        """
        call_id = self._next_call_id()
        start = start_tool_call(
            call_id,
            title,
            kind=kind,
            status=status,
            locations=locations,
            content=content,
            raw_input=raw_input,
        )
        await self._send(start)
        result = ToolCallResult(call_id)
        try:
            yield result
        except (StepFailed, RequestError) as exc:
            reason = describe_error(exc) if isinstance(exc, RequestError) else str(exc)
            await self._send(update_tool_call(call_id, status="failed", raw_output={"error": reason}))
            await self._say(f"{title} failed: {reason}")
            return
        except (Exception, asyncio.CancelledError):
            await self._quietly(self._send(update_tool_call(call_id, status="failed")))
            raise
        await self._send(
            update_tool_call(
                call_id, status=result.status, content=result.content, raw_output=result.raw_output
            )
        )
        if result.reply is not None:
            await self._say(result.reply)

    def _require(self, capable: bool | None, method: str) -> None:
        if not capable:
            raise StepFailed(f"the client does not offer {method}")

    async def _read_file(self, path: str) -> str:
        fs = self.client_capabilities.fs
        self._require(fs is not None and fs.read_text_file, "fs/read_text_file")
        response = await self.client.read_text_file(session_id=self.session.session_id, path=path)
        return response.content

    async def _read_if_exists(self, path: str) -> str | None:
        """The current content, or None when the file cannot be read (taken as: it does not exist)."""
        try:
            return await self._read_file(path)
        except (StepFailed, RequestError):
            return None

    async def _write_file(self, path: str, content: str) -> None:
        fs = self.client_capabilities.fs
        self._require(fs is not None and fs.write_text_file, "fs/write_text_file")
        await self.client.write_text_file(session_id=self.session.session_id, path=path, content=content)

    async def _write(self, action: WriteFile) -> None:
        path = self._absolute(action.path)
        old = await self._read_if_exists(path)
        new = (old or "") + action.text if action.append else action.text
        title = f"Append to {action.path}" if action.append else f"Write {action.path}"
        async with self._tool_call(
            title,
            "edit",
            locations=[ToolCallLocation(path=path)],
            content=[tool_diff_content(path, new, old)],
            raw_input={"path": path, "text": action.text, "append": action.append},
        ):
            await self._write_file(path, new)

    async def _edit(self, action: EditFile) -> None:
        path = self._absolute(action.path)
        async with self._tool_call(
            f"Edit {action.path}",
            "edit",
            locations=[ToolCallLocation(path=path)],
            raw_input={"path": path, "old": action.old, "new": action.new},
        ) as result:
            old = await self._read_file(path)
            if action.old not in old:
                raise StepFailed(f"{action.old!r} is not in {action.path}")
            new = old.replace(action.old, action.new, 1)
            await self._write_file(path, new)
            result.content = [tool_diff_content(path, new, old)]

    async def _read(self, display_path: str) -> None:
        path = self._absolute(display_path)
        async with self._tool_call(
            f"Read {display_path}", "read", locations=[ToolCallLocation(path=path)], raw_input={"path": path}
        ) as result:
            content = await self._read_file(path)
            lines = content.splitlines()
            result.raw_output = {"lines": len(lines)}
            if lines:
                result.reply = f"{display_path} has {_plural(len(lines), 'line')}. First line: {lines[0]}"
            else:
                result.reply = f"{display_path} is empty."

    async def _run(self, argv: tuple[str, ...]) -> None:
        command_line = shlex.join(argv)
        session_id = self.session.session_id
        async with self._tool_call(
            f"Run {command_line}",
            "execute",
            raw_input={"command": argv[0], "args": list(argv[1:]), "cwd": self.session.cwd},
        ) as result:
            self._require(self.client_capabilities.terminal, "terminal/create")
            created = await self.client.create_terminal(
                session_id=session_id,
                command=argv[0],
                args=list(argv[1:]),
                cwd=self.session.cwd,
                output_byte_limit=OUTPUT_BYTE_LIMIT,
            )
            terminal_id = created.terminal_id
            try:
                await self._send(update_tool_call(result.call_id, content=[tool_terminal_ref(terminal_id)]))
                exit_status = await self.client.wait_for_terminal_exit(
                    session_id=session_id, terminal_id=terminal_id
                )
                output = await self.client.terminal_output(session_id=session_id, terminal_id=terminal_id)
            except (Exception, asyncio.CancelledError):
                # Cancelled (or the client failed) while the command runs: stop it.
                await self._quietly(self.client.kill_terminal(session_id=session_id, terminal_id=terminal_id))
                raise
            finally:
                await self._quietly(
                    self.client.release_terminal(session_id=session_id, terminal_id=terminal_id)
                )
            code, signal = exit_status.exit_code, exit_status.signal
            result.status = "completed" if code == 0 else "failed"
            result.content = [tool_terminal_ref(terminal_id)]
            result.raw_output = {
                "exitCode": code,
                "signal": signal,
                "output": output.output,
                "truncated": output.truncated,
            }
            ending = f"exit code {code}" if signal is None else f"killed by signal {signal}"
            text = output.output.rstrip("\n")
            reply = f"Ran {command_line}: {ending}"
            reply += f"\n{text}" if text else " (no output)"
            if output.truncated:
                reply += "\n(output truncated)"
            result.reply = reply

    async def _shell(self, argv: tuple[str, ...]) -> None:
        """Run a command in this process, as agents with a shell tool of their own do, and only
        then tell of it, in one `tool_call` that comes ended: the latest a client may hear of
        such a command."""
        command_line = shlex.join(argv)
        title = f"Shell {command_line}"
        raw_input = {"command": argv[0], "args": list(argv[1:]), "cwd": self.session.cwd}
        call_id = self._next_call_id()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.session.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as exc:
            reason = f"cannot start {argv[0]}: {exc.strerror or exc}"
            await self._send(
                start_tool_call(
                    call_id,
                    title,
                    kind="execute",
                    status="failed",
                    raw_input=raw_input,
                    raw_output={"error": reason},
                )
            )
            await self._say(f"{title} failed: {reason}")
            return
        try:
            output, _ = await process.communicate()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise
        code = process.returncode if process.returncode is not None else -1
        truncated = len(output) > OUTPUT_BYTE_LIMIT
        text = output[-OUTPUT_BYTE_LIMIT:].decode(errors="replace")
        await self._send(
            start_tool_call(
                call_id,
                title,
                kind="execute",
                status="completed" if code == 0 else "failed",
                raw_input=raw_input,
                raw_output={"exitCode": code, "output": text, "truncated": truncated},
            )
        )
        ending = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        shown = text.rstrip("\n")
        reply = f"Ran {command_line} itself: {ending}"
        reply += f"\n{shown}" if shown else " (no output)"
        await self._say(reply + ("\n(output truncated)" if truncated else ""))

    async def _ask(self, title: str) -> None:
        async with self._tool_call(title, "other", status="pending") as result:
            response = await self.client.request_permission(
                session_id=self.session.session_id,
                tool_call=ToolCallUpdate(
                    tool_call_id=result.call_id, title=title, kind="other", status="pending"
                ),
                options=[ALLOW_OPTION, REJECT_OPTION],
            )
            outcome = response.outcome
            if isinstance(outcome, AllowedOutcome):
                chosen = outcome.option_id
                names = {option.option_id: option.name for option in (ALLOW_OPTION, REJECT_OPTION)}
                answer = names.get(chosen, chosen)  # an option we did not offer is shown by its id
                result.status = "completed" if chosen == ALLOW_OPTION.option_id else "failed"
                result.raw_output = {"outcome": "selected", "optionId": chosen}
            else:
                answer = "cancelled"
                result.status = "failed"
                result.raw_output = {"outcome": "cancelled"}
            result.reply = f'Asked "{title}": {answer}'

    # --- MCP servers: sessiond's, and any other the session was given ----------------

    async def _sessiond_tool(
        self, tool: str, arguments: dict[str, Any], server: str = SESSIOND_SERVER
    ) -> str:
        """Call a tool of one of the session's MCP servers ("sessiond" unless named); its text, or
        StepFailed saying why not."""
        if self.mcp is None:
            raise StepFailed(no_server_message(server))
        try:
            return await self.mcp.call(server, tool, arguments)
        except McpError as exc:
            raise StepFailed(str(exc)) from None

    async def _sessiond_json(self, tool: str, arguments: dict[str, Any], result: ToolCallResult) -> Any:
        """Call a tool whose answer is a JSON object, and keep it as the tool call's raw output."""
        text = await self._sessiond_tool(tool, arguments)
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise StepFailed(f"{tool} answered {text[:200]!r}, not a JSON object")
        result.raw_output = data
        return data

    @staticmethod
    def _mcp_input(tool: str, arguments: dict[str, Any], server: str = SESSIOND_SERVER) -> dict[str, Any]:
        return {"server": server, "tool": tool, "arguments": arguments}

    async def _suggest(self, action: SuggestTask) -> None:
        arguments: dict[str, Any] = {"title": action.title, "prompt": action.prompt}
        if action.why is not None:
            arguments["why"] = action.why
        title = f'Suggest task "{action.title}"'
        async with self._tool_call(
            title, "other", raw_input=self._mcp_input("suggest_task", arguments)
        ) as result:
            data = await self._sessiond_json("suggest_task", arguments, result)
            result.reply = f"Suggested task {data.get('task')}: {action.title}"

    async def _start_thread(self, prompt: str) -> None:
        arguments = {"prompt": prompt}
        title = f'Start thread "{_shorten(prompt)}"'
        async with self._tool_call(
            title, "other", raw_input=self._mcp_input("start_thread", arguments)
        ) as result:
            data = await self._sessiond_json("start_thread", arguments, result)
            thread = data.get("thread")
            if not isinstance(thread, str) or not thread:
                raise StepFailed(f"start_thread answered no thread id: {data}")
            self.session.threads.append(thread)
            result.reply = f"Started thread {thread}"

    async def _wait_threads(self, timeout: float | None) -> None:
        threads = list(self.session.threads)
        if not threads:
            await self._say("No threads to wait for.")
            return
        arguments: dict[str, Any] = {"ids": threads}
        if timeout is not None:
            arguments["timeout"] = timeout
        title = f"Wait for {_plural(len(threads), 'thread')}"
        async with self._tool_call(
            title, "other", raw_input=self._mcp_input("wait_threads", arguments)
        ) as result:
            data = await self._sessiond_json("wait_threads", arguments, result)
            reports = data.get("threads")
            if not isinstance(reports, list):
                raise StepFailed(f"wait_threads answered no reports: {data}")
            result.reply = "\n".join(_report_line(report) for report in reports)

    async def _call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        async with self._tool_call(
            f"Call {server} {tool}", "other", raw_input=self._mcp_input(tool, arguments, server)
        ) as result:
            text = await self._sessiond_tool(tool, arguments, server)
            try:
                result.raw_output = json.loads(text)
            except ValueError:
                result.raw_output = {"text": text}
            result.reply = text

    # --- prose ----------------------------------------------------------------

    async def _answer_prose(self, text: str) -> None:
        self.session.plan = [PlanItem(content=entry) for entry in PROSE_PLAN]
        for index in range(len(PROSE_PLAN)):
            self.session.plan[index].status = "in_progress"
            await self._send_plan()
            if index == 1:
                first_line = text.splitlines()[0] if text else ""
                await self._send(
                    update_agent_thought_text(f"The prompt has {len(text)} characters: {first_line}")
                )
            self.session.plan[index].status = "completed"
        await self._say(f"You said: {text}" if text else "You said nothing.")
        await self._say(PROSE_HINT)
        await self._send_plan()


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def _shorten(text: str, limit: int = 60) -> str:
    line = _first_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _report_line(report: Any) -> str:
    """One line of `wait`: the thread's id, its status, and the first line of its reply."""
    if not isinstance(report, dict):
        return str(report)
    head = f"{report.get('thread', '?')} {report.get('status', '?')}"
    reply = report.get("reply")
    error = report.get("error")
    if isinstance(reply, str) and reply.strip():
        return f"{head}: {_first_line(reply)}"
    if isinstance(error, str) and error.strip():
        return f"{head}: error: {_first_line(error)}"
    return f"{head} (no reply)"


def _crash(code: int) -> NoReturn:
    """Exit at once, without answering the prompt: what a crashing agent looks like to the daemon."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)


def _write_stderr(size: int) -> None:
    """Write exactly `size` bytes to fd 2 (blocking: a client that never drains stderr stalls here)."""
    repeats = size // len(_STDERR_FILLER) + 1
    data = (_STDERR_FILLER * repeats)[:size]
    view = memoryview(data)
    while view:
        try:
            written = os.write(2, view)
        except BlockingIOError:
            # fd 2 can share its open file with stdout, which asyncio made non-blocking.
            select.select([], [2], [])
            continue
        view = view[written:]
