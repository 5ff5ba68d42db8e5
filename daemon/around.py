"""Sessions around a main one: side chats, suggested tasks, threads, and their limits.

A side chat is a session of its own that starts from the main session's
context (forked at the agent when it can, else given an account of it) and
adds nothing to it. A suggested task waits in its agent's inbox until it is
accepted, then runs in a session of its own, no more at once than the
agent's `max_running_tasks`. A thread is a session a coordinator starts for
one part of a job, in a worktree of its own, which reports back. A session
tree (a session and everything started from it) shares the agent's budgets.

What it reads of the core and asks of it is `AroundPort`; asking a person
(`Permissions.ask`) and the daemon's MCP endpoint (made on first need by
whoever builds this, `mcp_http`) are handed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from sessiond.daemon.events import EventLog
from sessiond.daemon.prompt_limit import check_prompt_size
from sessiond.daemon.records import AgentRuntime, SessionRecord
from sessiond.daemon.session_mcp import SERVER_NAME, offered_mcp_servers, own_http_server, stored_specs
from sessiond.daemon.session_table import LazyIndex, SessionTable
from sessiond.daemon.tasks import TaskBook, TaskRecord
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.models import EventKind, SessionStatus

log = logging.getLogger("sessiond.around")

ACCOUNT_LINES = 40
WRITING_KINDS = frozenset({"edit", "delete", "move", "execute"})


def _in_git(root: str) -> bool:
    return (
        subprocess.run(
            ["git", "-C", root, "rev-parse", "--is-inside-work-tree"], capture_output=True, check=False
        ).returncode
        == 0
    )


def _repository_of(session: SessionRecord) -> m.PlacementSettings | None:
    """The settings of a session working in a worktree of a repository: its threads and tasks
    work in worktrees of the same repository (its root here is that repository, no directory)."""
    options = json.loads(session.placement_options or "{}")
    if session.placement != "worktree" or not options.get("repository"):
        return None
    return m.PlacementSettings(
        repository=options["repository"], checkout_dir=options.get("checkout_dir"), base=options.get("base")
    )


async def _helper_params(
    source: SessionRecord | None, agent: str, root: str, placement: str | None, title: str | None
) -> m.SessionOpenParams:
    """How a helper of `source` (a thread, a task) opens: in `root` (in a worktree when no placement
    is asked and the root is in git, else here), or, where `source` works in a worktree of a
    repository and the helper asks for no other root or placement, in a worktree of the same."""
    like = _repository_of(source) if source is not None and root == source.root else None
    if like is not None and placement in (None, "worktree"):
        return m.SessionOpenParams(agent=agent, placement="worktree", placement_settings=like, title=title)
    if placement is None:
        placement = "worktree" if await asyncio.to_thread(_in_git, root) else "here"
    return m.SessionOpenParams(agent=agent, root=root, placement=placement, title=title)


class AroundPort(Protocol):
    """What the sessions around read of the core (sessions, agents, a session's children, turns
    ending), ask of it (open sessions, turns waited on or not, a task it owns, a turn cancelled,
    a waiting turn's slot lent) and tell it (events); the core is one."""

    @property
    def events(self) -> EventLog: ...
    @property
    def sessions(self) -> SessionTable: ...
    @property
    def agents(self) -> Mapping[str, AgentRuntime]: ...
    @property
    def children(self) -> LazyIndex: ...
    @property
    def turn_end(self) -> asyncio.Condition: ...
    def get_session(self, session_id: str) -> SessionRecord: ...
    def get_agent(self, name: str) -> AgentRuntime: ...
    def session_info(self, s: SessionRecord, *, brief: bool = False) -> m.SessionInfo: ...
    async def open_sessions(
        self,
        params: m.SessionOpenParams,
        run: str | None = None,
        *,
        kind: str = "main",
        parent: str | None = None,
    ) -> list[SessionRecord]: ...
    async def prompt(self, params: m.SessionPromptParams) -> m.TurnResult: ...
    def start_in_background(
        self, session: SessionRecord, prompt: str, refused: Callable[[RpcError], None] | None = None
    ) -> None: ...
    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...
    def cancel_turn(self, turn_id: str) -> bool: ...
    def slot_lent(self, session_id: str | None) -> AbstractAsyncContextManager[None]: ...


class Endpoint(Protocol):
    """The daemon's own MCP endpoint (`mcp_http.McpEndpoint`), as the sessions are offered it."""

    @property
    def started_url(self) -> str | None: ...
    def address(self) -> str: ...
    async def close(self) -> None: ...


# Asks whoever answers permissions (`Permissions.ask`): the option chosen, or None.
AskPerson = Callable[[SessionRecord, dict[str, Any], list[dict[str, Any]]], Awaitable[str | None]]
# Makes the MCP endpoint, which knows the session a request acts for by its token (`caller_of_token`:
# None for no session's; ValueError, its sentence to be said, where that cannot be told).
MakeEndpoint = Callable[[Callable[[str], str | None]], Endpoint]


class Around:
    def __init__(
        self,
        core: AroundPort,
        tasks: TaskBook,
        state_dir: Path,
        *,
        ask_person: AskPerson,
        make_endpoint: MakeEndpoint,
    ) -> None:
        self.core = core
        self.tasks = tasks
        self._secret = _secret(state_dir / "session-secret")
        self._ask_person = ask_person
        self._make_endpoint = make_endpoint
        self._endpoint: Endpoint | None = None

    # ------------------------------------------------------------ session tokens (the MCP bridge)

    def token(self, session_id: str) -> str:
        """A secret that lets its holder act for this session alone: its id, then an HMAC of it."""
        digest = hmac.digest(self._secret, session_id.encode(), "sha256").hex()  # (one call, in C)
        return f"{session_id}.{digest}"

    def session_of_token(self, token: str) -> str | None:
        session_id = token.rpartition(".")[0]
        if session_id in self.core.sessions and hmac.compare_digest(self.token(session_id), token):
            return session_id
        return None

    def caller_of_token(self, token: str) -> str | None:
        """The session a request on the MCP endpoint acts for: its token's (None: no session's),
        but where the agent keeps one server of a name for all its sessions in a folder (opencode:
        the one offered last, whichever session calls it), the one of them that is mid-turn.
        ValueError, saying what to do, when several are."""
        session_id = self.session_of_token(token)
        session = self.core.sessions.get(session_id) if session_id is not None else None
        agent = self.core.agents.get(session.agent) if session is not None else None
        slot = agent.placed.get(session.id) if agent is not None and session is not None else None
        if session is None or slot is None or slot.process is None or not slot.process.shares_mcp_servers:
            return session_id
        root = _root_of(session)
        working = [
            other
            for sid in slot.live
            if (other := self.core.sessions.get(sid)) is not None
            and _root_of(other) == root
            and other.runtime is not None
            and other.runtime.running is not None
        ]
        if len(working) > 1:
            raise ValueError(
                f"sessiond cannot tell which session called this tool: agent {session.agent!r} keeps "
                f"one MCP server for all its sessions in {root}, and {len(working)} of them are working "
                f"({', '.join(s.id for s in working)}); run them one at a time there, or give each a "
                "folder of its own (placement worktree)"
            )
        return working[0].id if working else session.id

    async def mcp_servers(
        self, session: SessionRecord, socket_path: str, *, http: bool
    ) -> list[dict[str, object]]:
        """The MCP servers a session is offered: the daemon's own (below), then those its client
        gave it (an editor's, through `sessiond acp`: session_mcp.py)."""
        own = self._own_server(session, socket_path, http=http)
        return [own, *offered_mcp_servers(session.mcp_servers, http=http, session=session.id)]

    def _own_server(self, session: SessionRecord, socket_path: str, *, http: bool) -> dict[str, object]:
        """The MCP server every session is offered (suggest_task and the thread tools, for it alone):
        the daemon's own endpoint to an agent that takes http servers, else the stdio bridge."""
        token = self.token(session.id)
        if http:
            try:
                url = self.endpoint().address()  # at once: the server behind it may still be starting
            except OSError as exc:  # no port to bind: the bridge still works, offer it instead
                log.warning("the MCP endpoint did not start (%s); offering the stdio bridge", exc)
            else:
                return own_http_server(url, token)
        env = {
            "SESSIOND_SOCKET": socket_path,
            "SESSIOND_SESSION": session.id,
            "SESSIOND_SESSION_TOKEN": token,
        }
        return {
            "name": SERVER_NAME,
            "command": sys.executable,
            "args": ["-m", "sessiond.client.mcp_bridge"],
            "env": [{"name": k, "value": v} for k, v in env.items()],
        }

    @property
    def mcp_url(self) -> str | None:
        return self._endpoint.started_url if self._endpoint is not None else None

    def warm_endpoint(self) -> None:
        """Start the endpoint now, in the background: called as an agent that takes http MCP
        servers starts up, so the server is up by the time the agent connects to it."""
        with contextlib.suppress(OSError):  # met again, and said, by mcp_servers
            self.endpoint().address()

    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            self._endpoint = self._make_endpoint(self.caller_of_token)  # the mcp SDK: on first need
        return self._endpoint

    async def close(self) -> None:
        if self._endpoint is not None:
            await self._endpoint.close()

    # ------------------------------------------------------------ the tree and its budgets

    def root_of(self, session: SessionRecord) -> SessionRecord:
        seen = set()
        while session.parent and session.parent in self.core.sessions and session.id not in seen:
            seen.add(session.id)
            session = self.core.sessions[session.parent]
        return session

    def children(self, session_id: str) -> list[SessionRecord]:
        return list(self.core.children.get(session_id, ()))

    def members(self, root: SessionRecord) -> list[SessionRecord]:
        found, todo = [], [root]
        while todo:
            session = todo.pop()
            found.append(session)
            todo += self.children(session.id)
        return found

    @staticmethod
    def _spent(session: SessionRecord) -> tuple[int, float]:
        ins = session.insight
        if ins is None:
            return 0, 0.0
        return int(ins.usage.get("totalTokens", 0)), ins.cost()

    def tree(self, session: SessionRecord) -> m.TreeNode:
        children = [self.tree(child) for child in self.children(session.id)]
        tokens, cost = self._spent(session)
        return m.TreeNode(
            session=self.core.session_info(session, brief=True),
            children=children,
            tokens=tokens + sum(c.tokens for c in children),
            cost=round(cost + sum(c.cost for c in children), 6),
        )

    def over_budget(self, session: SessionRecord) -> str | None:
        """Why the session's tree may do no more work, or None."""
        root = self.root_of(session)
        agent = self.core.agents.get(root.agent)
        if agent is None:
            return None
        options = agent.spec.options
        if options.token_budget is None and options.cost_budget is None:
            return None
        tokens = cost = 0.0
        for member in self.members(root):
            spent_tokens, spent_cost = self._spent(member)
            tokens += spent_tokens
            cost += spent_cost
        if options.token_budget is not None and tokens >= options.token_budget:
            return (
                f"the session tree of {root.id} used {int(tokens)} tokens of its token_budget of "
                f"{options.token_budget}; raise it with agent/update to go on"
            )
        if options.cost_budget is not None and cost >= options.cost_budget:
            return (
                f"the session tree of {root.id} spent {cost:.4f} USD of its cost_budget of "
                f"{options.cost_budget:g}; raise it with agent/update to go on"
            )
        return None

    def enforce_budget(self, session: SessionRecord) -> None:
        """Past a budget, every running turn of the tree ends, saying why."""
        reason = self.over_budget(session)
        if reason is None:
            return
        for member in self.members(self.root_of(session)):
            turn = member.runtime.running if member.runtime else None
            if turn is not None and turn.limit is None:
                turn.limit = reason
                self.core.cancel_turn(turn.id)

    # ------------------------------------------------------------ side chats

    def account_of(self, main: SessionRecord) -> str:
        """A compact account of a session, for a side chat that cannot fork it."""
        ins = main.insight
        parts = [f"You are a side chat beside session {main.id}. Here is where it stands."]
        plan = ins.plan_view() if ins else None
        if plan and plan.entries:
            parts.append("Its plan:\n" + "\n".join(f"- [{e.status}] {e.content}" for e in plan.entries))
        if ins and ins.changes and ins.changes.files:
            parts.append(
                "Files it changed:\n"
                + "\n".join(f"- {f.path} ({f.kind}, +{f.added} -{f.removed})" for f in ins.changes.files)
            )
        if ins:
            tail = ins.transcript.tail(ACCOUNT_LINES)
            if tail:
                parts.append(
                    "The end of its transcript:\n" + "\n".join(f"{ln.role}: {ln.text}" for ln in tail)
                )
        parts.append("Answer the question below; change no files.")
        # As comment lines: a reader takes them as context, and a script-driven
        # agent (the demo agent) skips them and runs the prompt after them.
        return "\n".join(f"# {line}" if line else "#" for line in "\n\n".join(parts).splitlines())

    async def side(self, params: m.SideParams) -> m.SideResult:
        main = self.core.get_session(params.session)
        if (like := _repository_of(main)) is not None:
            raise RpcError(
                ErrorCode.CONFLICT,
                f"session {main.id!r} works in a worktree of {like.repository} made where its agent runs, "
                "and a side chat reads its main session's root on this machine; a side chat of it is not "
                "built: ask the session itself, or start a thread (it works in a worktree of the same "
                "repository)",
            )
        if params.question:
            check_prompt_size(params.question, self.core.get_agent(main.agent).spec, "question")
        (side,) = await self.core.open_sessions(
            m.SessionOpenParams(
                agent=main.agent,
                root=main.root,
                placement="here",
                # Untitled: its question names it, as a first prompt names any session (two side
                # chats of one session read apart), and clients show it under its main session.
                mcp_servers=stored_specs(main.mcp_servers),  # the same tools as the main one
            ),
            main.run,
            kind="side",
            parent=main.id,
        )
        side.writable = params.writable
        side.fork_from = main.id
        side.preface = self.account_of(main)
        reply = None
        if params.question:
            reply = await self.core.prompt(m.SessionPromptParams(session=side.id, prompt=params.question))
        return m.SideResult(session=self.core.session_info(side), forked=side.forked, reply=reply)

    def may_write(self, session: SessionRecord) -> bool:
        return session.kind != "side" or session.writable

    def decide_for_side(self, session: SessionRecord, tool_call: dict[str, object]) -> bool | None:
        """A read-only side chat's permission: False for writing tools, None to ask as usual."""
        if self.may_write(session):
            return None
        return False if tool_call.get("kind") in WRITING_KINDS else None

    # ------------------------------------------------------------ suggested tasks

    def suggest(self, params: m.TaskSuggestParams) -> TaskRecord:
        source = self.core.get_session(params.from_session) if params.from_session else None
        agent = params.agent or (source.agent if source else None)
        if agent is None:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "agent: say whose inbox (agent), or which session suggests it (fromSession)",
            )
        check_prompt_size(params.prompt, self.core.get_agent(agent).spec)  # refuses an unknown agent too
        task = self.tasks.add(agent, params, params.root or (source.root if source else None))
        self._announce(task)
        return task

    def _announce(self, task: TaskRecord) -> None:
        self.core.events.emit(
            EventKind.TASK,
            agent=task.agent,
            session=task.session or task.from_session,
            task=task.info().wire(),
        )

    def dismiss(self, task_id: str, reason: str) -> TaskRecord:
        task = self.tasks.get(task_id)
        if task.status != "suggested":
            raise RpcError(
                ErrorCode.CONFLICT, f"task {task_id!r} is {task.status}; only a suggested task is dismissed"
            )
        task.status, task.reason = "dismissed", reason
        self.tasks.save(task)
        self._announce(task)
        return task

    async def accept(self, task_id: str) -> TaskRecord:
        task = self.tasks.get(task_id)
        if task.status != "suggested":
            raise RpcError(
                ErrorCode.CONFLICT, f"task {task_id!r} is {task.status}; only a suggested task is accepted"
            )
        if task.root is None:
            raise RpcError(
                ErrorCode.CONFLICT, f"task {task_id!r} has no root to run in; suggest it again with root"
            )
        check_prompt_size(task.prompt, self.core.get_agent(task.agent).spec)  # its limit may be lower now
        task.status = "queued"
        self.tasks.save(task)
        await self._start_tasks(task.agent)
        return task

    async def _start_tasks(self, agent_name: str) -> None:
        agent = self.core.agents.get(agent_name)
        limit = agent.spec.options.max_running_tasks if agent else None
        while (task := self.tasks.next_queued(agent_name)) is not None:
            if limit is not None and self.tasks.running(agent_name) >= limit:
                return
            await self._start(task)

    async def _start(self, task: TaskRecord) -> None:
        assert task.root is not None
        source = self.core.sessions.get(task.from_session) if task.from_session else None
        opening = await _helper_params(source, task.agent, task.root, task.placement, task.title)
        if source is not None and (reason := self.over_budget(source)) is not None:
            task.status, task.reason = "failed", reason  # it would never get a turn: say so now
            self.tasks.save(task)
            self._announce(task)
            return
        try:
            (session,) = await self.core.open_sessions(
                opening,
                source.run if source is not None else None,
                kind="task",
                parent=task.from_session,
            )
        except RpcError as exc:
            task.status, task.reason = "failed", exc.message
            self.tasks.save(task)
            self._announce(task)
            return
        if source is not None:
            session.preface = (
                self.account_of(source)
                .replace("You are a side chat beside", "This task was suggested in")
                .replace("Answer the question below; change no files.", "Do the task below.")
            )
        task.status, task.session = "running", session.id
        self.tasks.save(task)
        self._announce(task)

        def refused(exc: RpcError) -> None:  # past a budget, say: the task fails saying why; the next runs
            if task.status == "running" and task.session == session.id:
                task.status, task.reason = "failed", exc.message
                self.tasks.save(task)
                self._announce(task)
                self.core.spawn(self._start_tasks(task.agent), f"tasks-{task.agent}")

        self.core.start_in_background(session, task.prompt, refused)

    def turn_finished(self, session: SessionRecord, error: str | None) -> None:
        """A task's session ended its turn: the task is done (or failed), the next may start."""
        if session.kind != "task":
            return
        task = next((t for t in self.tasks.tasks.values() if t.session == session.id), None)
        if task is None or task.status != "running":
            return
        task.status, task.reason = ("failed", error) if error else ("done", None)
        self.tasks.save(task)
        self._announce(task)
        self.core.spawn(self._start_tasks(task.agent), f"tasks-{task.agent}")

    # ------------------------------------------------------------ threads

    async def start_thread(self, params: m.ThreadStartParams) -> SessionRecord:
        parent = self.core.get_session(params.parent)
        root = self.root_of(parent)
        agent = self.core.get_agent(parent.agent)
        check_prompt_size(params.prompt, agent.spec)
        options = agent.spec.options
        threads = sum(1 for s in self.members(root) if s.kind == "thread")
        if options.max_threads is not None and threads >= options.max_threads:
            raise RpcError(
                ErrorCode.LIMIT_REACHED,
                f"agent {agent.name!r} allows no helpers (max_threads=0)"
                if options.max_threads == 0
                else f"the session tree of {root.id} has its {options.max_threads} threads (max_threads)",
            )
        if (reason := self.over_budget(parent)) is not None:
            raise RpcError(ErrorCode.LIMIT_REACHED, reason)
        if options.helper_policy == "ask" and not await self._user_allows(parent, params.prompt):
            raise RpcError(ErrorCode.LIMIT_REACHED, "the user declined to start this thread")
        title = params.title or params.prompt[:80]
        opening = await _helper_params(parent, parent.agent, parent.root, params.placement, title)
        (thread,) = await self.core.open_sessions(  # the thread belongs to its coordinator's run
            opening,
            parent.run,
            kind="thread",
            parent=parent.id,
        )
        self.core.start_in_background(thread, params.prompt)
        return thread

    async def _user_allows(self, parent: SessionRecord, prompt: str) -> bool:
        options = [
            {"optionId": "allow", "name": "Start it", "kind": "allow_once"},
            {"optionId": "reject", "name": "Do not", "kind": "reject_once"},
        ]
        tool_call = {"title": f"start a thread: {prompt[:120]}", "kind": "other"}
        chosen = await self._ask_person(parent, tool_call, options)
        return chosen == "allow"

    def report(self, session: SessionRecord) -> m.ThreadReport:
        rt = session.runtime
        busy = rt is not None and (rt.running is not None or bool(rt.queue))
        ins = session.insight
        return m.ThreadReport(
            session=session.id,
            status=session.status,
            done=not busy and session.turns > 0,
            reply=session.last_reply or session.recap,
            error=session.last_error if session.status is SessionStatus.FAILED else None,
            plan=ins.plan_view() if ins else None,
            changes=ins.changes if ins else None,
        )

    async def wait(self, params: m.ThreadWaitParams, *, waiter: str | None = None) -> m.ThreadReports:
        """Reports once every thread is done (or at the timeout). `waiter` is the session whose
        turn is asking, if one is: its agent slot goes to the threads while it waits."""
        sessions = [self.core.get_session(t) for t in params.threads]
        async with self.core.slot_lent(waiter):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(params.timeout):
                    async with self.core.turn_end:
                        await self.core.turn_end.wait_for(lambda: all(self.report(s).done for s in sessions))
                    # A report carries the changed files: let their count after the last turn finish.
                    counting = [
                        s.runtime.changes_task for s in sessions if s.runtime and s.runtime.changes_task
                    ]
                    await asyncio.gather(*(asyncio.shield(t) for t in counting if not t.done()))
        return m.ThreadReports(reports=[self.report(s) for s in sessions])

    def broadcast(self, params: m.BroadcastParams) -> list[str]:
        targets: list[SessionRecord] = []
        if params.sessions:
            targets += [self.core.get_session(s) for s in params.sessions]
        if params.threads_of:
            coordinator = self.core.get_session(params.threads_of)
            targets += [s for s in self.children(coordinator.id) if s.kind == "thread" and not s.closed]
        if not targets:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, "sessions: name the sessions, or threadsOf a coordinator"
            )
        for session in targets:  # all or none: each target's agent takes the prompt, within budget
            check_prompt_size(params.prompt, self.core.get_agent(session.agent).spec)
            if (reason := self.over_budget(session)) is not None:
                raise RpcError(ErrorCode.LIMIT_REACHED, f"nothing was queued: {session.id}: {reason}")
        for session in targets:
            self.core.start_in_background(session, params.prompt)
        return [s.id for s in targets]


def _secret(path: Path) -> bytes:
    if path.exists():
        return path.read_bytes()
    value = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(value)
    return value


def _root_of(session: SessionRecord) -> str:
    """The folder the session works in at its agent (its placement's, once it has one)."""
    return session.runtime.placement.root if session.runtime is not None else session.root
