"""The `sessiond` MCP tools: `suggest_task`, `start_thread`, `thread_status`, `wait_threads`.

One table of tools, served two ways: by the stdio bridge, a process of its own
that reaches the daemon over its socket as a client acting for one session
(`sessiond.client.mcp_bridge`), and by the daemon's own http endpoint
(`mcp_http.py`), which carries the requests out in the daemon. Each tool is one
request (`task/suggest`, `thread/start`, `thread/status`, `thread/wait`) made
through a `Link` acting for the session asking; its params and results are the
wire models of `sessiond.protocol`.

It imports `sessiond.protocol`, pydantic and the `mcp` SDK, nothing else of
ours: the bridge (a client) imports it, and the daemon imports it only once it
serves MCP.

Results are short JSON texts for a model to read. A daemon error becomes an MCP
tool error (``isError``) whose text is the daemon's message, verbatim.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Protocol, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field, ValidationError

from sessiond.protocol import methods as m
from sessiond.protocol import models as pm
from sessiond.protocol.version import VERSION

SERVER_NAME = "sessiond"

INSTRUCTIONS = (
    "Tools of sessiond, the daemon that runs this session. suggest_task proposes work for later: "
    "it waits in the user's inbox until accepted, then runs in a session of its own. start_thread "
    "starts a helper session (a thread) on part of this job, in its own worktree; it reports back "
    "through thread_status and wait_threads (its last reply, plan and changed files)."
)

R = TypeVar("R", bound=BaseModel)


class BridgeError(Exception):
    """A tool call that failed; its message is what the model reads (the daemon's own, when it answered)."""


def summary(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


class Link(Protocol):
    """Where the tools' requests go, on behalf of one session."""

    @property
    def session(self) -> str: ...

    async def call(self, method: str, params: Mapping[str, Any], result: type[R]) -> R:
        """``method``'s result as ``result``. Every failure is a BridgeError saying why."""
        ...


def checked_params(method: str, params: Mapping[str, Any], result: type[BaseModel]) -> BaseModel:
    """``params`` as ``method``'s params model; BridgeError naming each field at fault."""
    spec = m.METHODS[method]
    assert spec.result is result, f"{method} answers {spec.result.__name__}"
    try:
        return spec.params.model_validate(dict(params))
    except ValidationError as e:
        raise BridgeError(summary(e)) from None


# ---------------------------------------------------------------- what the tools answer


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _plan(plan: pm.Plan | None) -> dict[str, Any] | None:
    if plan is None or not plan.entries:
        return None
    return {
        "done": plan.done,
        "total": plan.total,
        "entries": [{"content": entry.content, "status": entry.status} for entry in plan.entries],
    }


def _changes(changes: pm.Changes | None) -> dict[str, Any] | None:
    if changes is None or not changes.files:
        return None
    return {
        "added": changes.added,
        "removed": changes.removed,
        "files": [
            {"path": item.path, "kind": str(item.kind), "added": item.added, "removed": item.removed}
            for item in changes.files
        ],
    }


def report_json(report: pm.ThreadReport) -> dict[str, Any]:
    """A thread's report as a model reads it: what it said, its plan and changed files."""
    shown: dict[str, Any] = {
        "thread": report.session,
        "status": str(report.status),
        "done": report.done,
        "reply": report.reply,
        "error": report.error,
        "plan": _plan(report.plan),
        "changes": _changes(report.changes),
    }
    return {key: value for key, value in shown.items() if value is not None}


def task_json(task: pm.TaskInfo) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "task": task.id,
        "status": task.status,
        "title": task.title,
        "agent": task.agent,
        "placement": task.placement,
    }
    return {key: value for key, value in shown.items() if value is not None}


def thread_json(session: pm.SessionInfo) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "thread": session.id,
        "status": str(session.status),
        "title": session.title,
        "placement": session.placement,
        "root": session.root,
    }
    return {key: value for key, value in shown.items() if value is not None}


# ---------------------------------------------------------------- the server

Title = Annotated[str, Field(min_length=1, max_length=300, description="A short title for the inbox.")]
Placement = Annotated[
    pm.Placement | None,
    Field(description="Where it would run: here, worktree, sandbox, container or ssh. "
          "Default: a worktree in a git repository, else here."),
]  # fmt: skip
ThreadId = Annotated[str, Field(min_length=1, description="A thread's id, as start_thread gave it.")]


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


LinkFor = Callable[[Context], Link]


async def _answer(
    link_for: LinkFor, ctx: Context, work: Callable[[Link], Awaitable[dict[str, Any]]]
) -> CallToolResult:
    """The tool's result: its JSON, or an error result whose text is the failure's message, verbatim."""
    try:
        value = await work(link_for(ctx))
    except BridgeError as e:
        return _text(str(e), error=True)
    return _text(_dumps(value))


def build_server(link_for: LinkFor) -> MCPServer:
    """The MCP server with its four tools, each a request through the link of the session asking
    (one fixed link for the stdio bridge; found by the request's credentials where one server
    serves many sessions)."""

    async def suggest(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        return task_json(
            await link.call(m.TASK_SUGGEST, {**params, "from_session": link.session}, pm.TaskInfo)
        )

    async def start(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        return thread_json(
            await link.call(m.THREAD_START, {**params, "parent": link.session}, pm.SessionInfo)
        )

    async def status(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        return report_json(await link.call(m.THREAD_STATUS, params, pm.ThreadReport))

    async def wait(link: Link, params: dict[str, Any]) -> dict[str, Any]:
        reports = await link.call(m.THREAD_WAIT, params, pm.ThreadReports)
        return {"threads": [report_json(report) for report in reports.reports]}

    async def suggest_task(
        ctx: Context,
        title: Title,
        prompt: Annotated[str, Field(min_length=1, description="What the task's session is to do.")],
        why: Annotated[str | None, Field(description="Why this is worth doing.")] = None,
        placement: Placement = None,
    ) -> CallToolResult:
        """Suggest a task: it waits in the user's inbox; once accepted it runs in a session of its own,
        handed this session's context. Answers the task's id and status."""
        params = {"title": title, "prompt": prompt, "why": why, "placement": placement}
        return await _answer(link_for, ctx, lambda link: suggest(link, params))

    async def start_thread(
        ctx: Context,
        prompt: Annotated[str, Field(min_length=1, description="What the thread is to do.")],
        placement: Placement = None,
        title: Annotated[str | None, Field(description="A short title for the thread.")] = None,
    ) -> CallToolResult:
        """Start a thread: a helper session of its own (its own worktree by default) that works on
        the prompt and reports back. Answers its id; follow it with thread_status or wait_threads."""
        params = {"prompt": prompt, "placement": placement, "title": title}
        return await _answer(link_for, ctx, lambda link: start(link, params))

    async def thread_status(ctx: Context, id: ThreadId) -> CallToolResult:
        """A thread's report now: its status, whether it is done, its last reply, plan and changed
        files."""
        return await _answer(link_for, ctx, lambda link: status(link, {"thread": id}))

    async def wait_threads(
        ctx: Context,
        ids: Annotated[list[str], Field(min_length=1, description="The threads' ids.")],
        timeout: Annotated[
            float | None, Field(gt=0, description="Seconds to wait at most; then the reports as they are.")
        ] = None,
    ) -> CallToolResult:
        """Wait until the threads are done (or the timeout runs out); answers their reports."""
        return await _answer(
            link_for, ctx, lambda link: wait(link, {"threads": list(ids), "timeout": timeout})
        )

    server: MCPServer = MCPServer(
        SERVER_NAME, version=VERSION, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    for tool in (suggest_task, start_thread, thread_status, wait_threads):
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""))
    return server
