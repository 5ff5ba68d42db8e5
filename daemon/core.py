"""The core: agents, sessions and turns.

It knows nothing of JSON-RPC, pygls or ACP's wire types: the server calls
it with validated protocol models, and it drives agents through
`AgentProcess`. Every change it makes is stored and emitted on the event log.

Ordering rules it keeps:
- the turns of one session run one at a time, in the order they were asked;
- turns of different sessions run at once, up to the agent's max_active_turns;
- an agent hears of a session on its first turn, never before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sessiond.daemon import importer, titles
from sessiond.daemon import store as st
from sessiond.daemon.agent_host import AgentHost
from sessiond.daemon.agent_spawn import kill, ray_request, spawn_agent
from sessiond.daemon.agent_types import (
    OPENING_WAIT,
    AgentExited,
    AgentRequestFailed,
    PromptOverdue,
    SessionSetup,
)
from sessiond.daemon.agents_config import DEMO
from sessiond.daemon.around import Around
from sessiond.daemon.controls import Offer, offer_of, read_only, read_only_modes, value_problem
from sessiond.daemon.events import EventLog
from sessiond.daemon.insight import ending_lines, recap_of
from sessiond.daemon.insight_feed import InsightFeed
from sessiond.daemon.merging import Merging
from sessiond.daemon.permissions import Permissions
from sessiond.daemon.placements import MODULES as PLACEMENT_MODULES
from sessiond.daemon.placements import (
    PlacementError,
    PlacementOptions,
    as_repository,
    as_worktree,
    make_placement,
    validate_placement,
)
from sessiond.daemon.prompt_limit import check_prompt_size
from sessiond.daemon.records import (
    INSERT_SESSIONS,
    SAVE_SESSION,
    UPDATE_SESSION,
    UPSERT_TURN,
    AgentRuntime,
    ProcessRuntime,
    SessionRecord,
    SessionRuntime,
    Turn,
)
from sessiond.daemon.session_mcp import stored_mcp_servers
from sessiond.daemon.session_table import LazyIndex, SessionTable
from sessiond.daemon.states import Outcome, derive_status
from sessiond.protocol import models as m
from sessiond.protocol import paths
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.models import EventKind, SessionStatus

if TYPE_CHECKING:  # the ACP SDK is imported on the first turn that starts an agent
    from sessiond.daemon.acp_backend import AgentProcess

ACP_BACKEND = "sessiond.daemon.acp_backend"
RAY_RUNNER = "sessiond.daemon.ray_runner"

log = logging.getLogger("sessiond.core")

# How long an agent has to end a turn after being told to cancel it, before
# the daemon stops waiting and ends the turn as cancelled anyway.
CANCEL_GRACE = 10.0
# After a load by an agent that replays the session's history after answering it (gemini-cli):
# the replay is over once the agent said nothing of the session for REPLAY_QUIET seconds (it
# writes it at once), and at most REPLAY_LONGEST seconds are waited for that.
REPLAY_QUIET = 0.5
REPLAY_LONGEST = 30.0
# Seconds an agent has, as the daemon stops, to end after its input closes, then after SIGTERM,
# before SIGKILL (claude-agent-acp does not end at the end of its input: each stop waited 3 s).
SHUTDOWN_GRACE = 1.0
# How a turn that a stop cut off ended: one that ran may have done part of its work already.
INTERRUPTED = (
    "interrupted: the daemon stopped while this turn was running; the agent may have done part of "
    "it: look at the session's changed files, then send it again"
)
INTERRUPTED_QUEUED = (
    "interrupted: the daemon stopped before this turn reached the agent; none of it ran: send it again"
)


def _now() -> float:
    return time.time()


def _placement_failed(session: SessionRecord, exc: PlacementError) -> RpcError:
    return RpcError(
        ErrorCode.PLACEMENT_FAILED,
        f"the session's {session.placement} placement could not be set up: {exc}; "
        "the session stays usable: send the prompt again once that is fixed",
    )


def _silence(session: SessionRecord, running: Turn) -> str | None:
    """What a working session's status says while its agent is silent (flagged agent_silent): since
    when, and the last error or retry line of the agent's log since the turn was sent."""
    ins = session.insight
    if m.Attention.AGENT_SILENT not in session.flags or ins is None or ins.last_activity is None:
        return None
    since = time.strftime("%H:%M:%S", time.localtime(ins.last_activity))
    said = running.log_says() if running.log_says is not None else None
    heard = f"; its log: {said}" if said else ""
    return f"no word from the agent since {since}{heard}; wait, or cancel the turn"


def _index(runtime: AgentRuntime, slot: ProcessRuntime) -> dict[str, Any]:
    """An agent.process event's `process` (which of the agent's processes), when it has (or had) several."""
    return {"process": slot.index} if len(runtime.processes) > 1 or slot.index else {}


def _together(each: list[m.AgentProcessInfo], active_turns: int) -> m.AgentProcessInfo:
    """An agent's processes taken together: running if one is; pid, node and what the agent said
    of itself from the first running one (else the first); counts summed."""
    first = next((p for p in each if p.state is m.AgentProcessState.RUNNING), each[0])
    states = {p.state for p in each}
    state = (
        m.AgentProcessState.RUNNING
        if m.AgentProcessState.RUNNING in states
        else m.AgentProcessState.CRASHED
        if m.AgentProcessState.CRASHED in states
        else m.AgentProcessState.STOPPED
    )
    memory = [p.memory for p in each if p.memory is not None]
    caps = [p.live_cap for p in each if p.live_cap is not None]
    return first.model_copy(
        update={
            "index": None,
            "state": state,
            "memory": sum(memory) if memory else None,
            "starts": sum(p.starts for p in each),
            "last_error": next((p.last_error for p in each if p.last_error), None),
            "live_sessions": sum(p.live_sessions for p in each),
            "live_cap": sum(caps) if caps else None,  # (of the processes started)
            "active_turns": active_turns,
            "malformed_updates": sum(p.malformed_updates for p in each),
        }
    )


async def _replay_heard(rt: SessionRuntime) -> None:
    """Until what the agent replays of a session it loaded, after answering the load, has stopped
    coming: REPLAY_QUIET seconds in which it said nothing of the session, REPLAY_LONGEST at most."""
    heard = rt.replaying = asyncio.Event()
    try:
        async with asyncio.timeout(REPLAY_LONGEST):
            while True:
                heard.clear()
                try:
                    async with asyncio.timeout(REPLAY_QUIET):
                        await heard.wait()
                except TimeoutError:
                    return  # quiet: the replay is over
    except TimeoutError:
        log.info("an agent still replayed a loaded session after %g s; its next turn goes on", REPLAY_LONGEST)
    finally:
        rt.replaying = None


def _dt(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


class Core:
    def __init__(
        self, store: st.Store, events: EventLog, *, state_dir: Path, version: str, state_rate: float = 10.0
    ) -> None:
        self.store = store
        self.events = events
        self.state_dir = state_dir
        self.version = version
        self.agents: dict[str, AgentRuntime] = {}
        # Sessions are read from the store on first need (see session_table), as a dict by id.
        self.sessions = SessionTable(store, self._adopt)
        self.by_agent_session: dict[tuple[str, str], SessionRecord] = {}
        # Rows written as they stand at the next commit, in one statement for all (store.RowsAtCommit).
        self._session_rows: st.RowsAtCommit[str, SessionRecord] = st.RowsAtCommit(
            store, UPDATE_SESSION, SessionRecord.changes, self._sessions_stored
        )
        self._turn_rows: st.RowsAtCommit[int, Turn] = st.RowsAtCommit(store, UPSERT_TURN, Turn.row)
        self.children = LazyIndex(self.sessions, "parent")  # by parent id: side chats, tasks, threads
        self.by_run = LazyIndex(self.sessions, "run")  # the sessions each run opened
        self._next_ordinal = 1
        # The collaborators see the core through their ports (`self`, which mypy checks against
        # each); what one needs of another is handed over here. `around` is built later (by
        # serve, with its task inbox), so the budget and side-chat rules reach it when called.
        self.feed = InsightFeed(
            self,
            state_rate=state_rate,
            enforce_budget=lambda session: self.around.enforce_budget(session),
            on_silence=lambda session: self.set_status(session),
        )
        self.permissions = Permissions(
            self, decide_for_side=lambda session, tool_call: self.around.decide_for_side(session, tool_call)
        )
        self.merging = Merging(self)
        self.first_turn_at: float | None = None
        self.turn_end = asyncio.Condition()
        self.socket_path = ""
        # The daemon's own folders (socket's, state, config): sandbox and container hide them.
        self.daemon_dirs: tuple[str, ...] = (str(state_dir),)
        self.around: Around  # set by whoever builds the core, with its task inbox
        self.last_turn_end: float | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._creating: set[str] = set()  # agents whose rows are being committed

    # ================================================================ start-up

    def load(
        self, builtin: list[m.AgentSpec], configured: list[m.AgentSpec], counts: Sequence[sqlite3.Row]
    ) -> None:
        """Read agents and sessions back from the store; mark turns cut off by a stop as interrupted.
        `counts`: every stored session counted by status and agent (`store.session_counts`), read
        before this on a thread of its own, where SQLite's work overlaps the daemon's imports."""
        now = _now()
        for row in self.store.query("SELECT spec FROM agents ORDER BY created_at"):
            spec = m.AgentSpec.model_validate_json(row["spec"])
            self.agents[spec.name] = AgentRuntime(spec=spec)
        for spec in builtin:
            runtime = self.agents.get(spec.name)
            if runtime is None:
                self.agents[spec.name] = runtime = AgentRuntime(spec=spec)
            # The built-in command follows this installation; its options are the user's.
            runtime.spec = spec.model_copy(update={"options": runtime.spec.options})
            runtime.builtin = True
        for spec in configured:
            self.agents[spec.name] = AgentRuntime(spec=spec, builtin=spec.name == DEMO)
        for runtime in self.agents.values():
            self._configure_slots(runtime)
            self._save_agent(runtime.spec, wait=False)

        # Turns a stop cut off, and their sessions: marked here in memory; stored, with the
        # events that tell of them, by `announce_interrupted` before any client is served.
        self._cut_off_turns = [
            (row["id"], row["session"], INTERRUPTED if row["state"] == "running" else INTERRUPTED_QUEUED)
            for row in self.store.query(
                "SELECT id, session, state FROM turns WHERE state IN ('queued', 'running') ORDER BY queued_at"
            )
        ]
        self._cut_off_sessions: list[SessionRecord] = []
        self._cut_off_at = now
        cut_off: dict[str, str] = {}  # session -> how its turns ended: as the one that ran, if one did
        ended: Counter[str] = Counter()  # session -> its turns cut off: they ended, interrupted
        for _, session_id, error in self._cut_off_turns:
            ended[session_id] += 1
            if cut_off.get(session_id) != INTERRUPTED:
                cut_off[session_id] = error
        # Only the sessions with something to show are read now (not idle or closed, or cut off);
        # `feed.load` reads those with a plan, usage or changes stored; the rest on first need.
        busy = [s.value for s in SessionStatus if s not in (SessionStatus.IDLE, SessionStatus.CLOSED)]
        for record in self.sessions.where(
            f"status IN ({','.join('?' * len(busy))}) OR id IN (SELECT value FROM json_each(?))",
            (*busy, json.dumps(sorted(cut_off))),
        ):
            if record.id in cut_off or record.status in (
                SessionStatus.WORKING,
                SessionStatus.QUEUED,
                SessionStatus.NEEDS_YOU,
            ):
                record.last_outcome = Outcome.FAILED
                record.last_error = cut_off.get(record.id, INTERRUPTED)
                record.last_stop_reason = None  # (as for any failed turn: the last was not stopped so)
                record.turns += ended[record.id]
                record.status = SessionStatus.FAILED
                record.status_since = now
                self._cut_off_sessions.append(record)
        for row in self.store.query("SELECT COALESCE(MAX(ordinal), 0) AS last FROM sessions"):
            self._next_ordinal = row["last"] + 1
        for row in counts:
            if row["status"] != SessionStatus.CLOSED.value and row["agent"] in self.agents:
                self.agents[row["agent"]].open_sessions += row["n"]
        self.feed.load()
        # The fleet's tally, for the sessions still only in the store (idle or closed, nothing stored
        # about them but their row): their statuses and turns, counted in SQL.
        by_status, turns = self.sessions.not_loaded_tally(counts)
        self.feed.tally.turns += turns
        for status, n in by_status.items():
            if status == SessionStatus.CLOSED.value:
                self.feed.tally.closed += n
            else:
                self.feed.tally.by_status[SessionStatus(status)] += n

    async def announce_interrupted(self) -> None:
        """Store and tell what `load` found cut off by a stop: each such turn ends (`turn.ended`,
        outcome interrupted) and its session's status moves, in one commit with the rows that
        mark them, so a client that resumes from its last seq sees them end, and a second start
        finds nothing left to announce. Call once the store batches writes, before serving;
        raises `StoreUnavailable` when the store says no."""
        turns, sessions = self._cut_off_turns, self._cut_off_sessions
        self._cut_off_turns, self._cut_off_sessions = [], []
        if not turns and not sessions:
            return
        # Events first: the log's flush, queued before the rows' commit, commits the rows with them.
        for turn_id, session_id, error in turns:
            record = self.sessions.get(session_id)
            self.events.emit(
                EventKind.TURN_ENDED,
                agent=record.agent if record is not None else None,
                session=session_id,
                turn=turn_id,
                outcome=m.TurnOutcome.INTERRUPTED.value,
                error=error,
            )
        for record in sessions:
            self.events.emit(
                EventKind.SESSION_STATUS,
                agent=record.agent,
                session=record.id,
                status=record.status.value,
                since=record.status_since,
            )
        if turns:
            self.store.write(
                st.executemany(
                    "UPDATE turns SET state='interrupted', error=?, ended_at=? WHERE id=?",
                    [(error, self._cut_off_at, turn_id) for turn_id, _, error in turns],
                ),
                wait=False,
            )
        for record in sessions:
            self._save_session(record)
        await self.store.flush()

    def _adopt(self, record: SessionRecord) -> None:
        """Index a session just loaded or opened by its parent and its run."""
        if record.parent is not None:
            self.children.add(record.parent, record)
        if record.run is not None:
            self.by_run.add(record.run, record)

    def _configure_slots(self, runtime: AgentRuntime) -> list[ProcessRuntime]:
        """Its turn slots and its processes as its options say; the processes it no longer has."""
        cap = runtime.spec.options.max_active_turns
        runtime.slots = asyncio.Semaphore(cap) if cap else None
        return runtime.resize(runtime.spec.options.processes)

    # ================================================================ agents

    def get_agent(self, name: str) -> AgentRuntime:
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none"
            agents_toml = paths.config_dir() / "agents.toml"
            raise RpcError(
                ErrorCode.AGENT_NOT_FOUND,
                f"no agent named {name!r} (known: {known}); add it to {agents_toml} (read when the "
                "daemon starts), or create it with agent/create",
            ) from None

    def agent_info(self, runtime: AgentRuntime) -> m.AgentInfo:
        each = [self._process_info(runtime, slot) for slot in runtime.processes]
        return m.AgentInfo(
            name=runtime.name,
            command=runtime.spec.command,
            env_keys=sorted(runtime.spec.env),
            options=runtime.spec.options,
            builtin=runtime.builtin,
            open_sessions=runtime.open_sessions,
            turns=self._agent_turns(runtime.name),
            process=each[0] if len(each) == 1 else _together(each, runtime.active_turns),
            processes=each,
        )

    def _process_info(self, runtime: AgentRuntime, slot: ProcessRuntime) -> m.AgentProcessInfo:
        process = slot.process
        state = m.AgentProcessState.STOPPED
        if process is not None and process.alive:
            state = m.AgentProcessState.RUNNING
        elif slot.crashed:
            state = m.AgentProcessState.CRASHED
        caps = None
        note = None
        if process is not None and process.started_at is not None:
            c = process.capabilities
            caps = m.AgentCapabilitiesInfo(
                load_session=c.load_session,
                list=c.list,
                resume=c.resume,
                fork=c.fork,
                close=c.close,
                mcp_http=c.mcp_http,
            )
            if not self._can_evict(process):
                note = (
                    "this agent cannot close and restore sessions (no session/close with "
                    "session/resume or session/load): its sessions stay open at the agent"
                    + (", over max_live_sessions" if process.live_cap else "")
                )
        alive = process is not None and process.alive
        return m.AgentProcessInfo(
            index=slot.index,
            state=state,
            pid=process.pid if process is not None and alive else None,
            node=process.node if process is not None else None,
            memory=process.memory() if process is not None and alive else None,
            started_at=_dt(process.started_at) if process and process.started_at else None,
            exit_code=process.exit_code if process is not None else None,
            starts=slot.starts,
            last_error=slot.last_error,
            capabilities=caps,
            agent_info=process.agent_info if process is not None else None,
            live_sessions=len(slot.live),
            live_cap=process.live_cap if process is not None and process.started_at is not None else None,
            active_turns=sum(1 for sid in slot.live if self._prompting(sid)),
            note=note,
            log_path=str(self._log_path(runtime.name)),
            malformed_updates=process.malformed_updates if process is not None else 0,
            auth_methods=process.auth_methods if process is not None else [],
            authenticated=process.authenticated if process is not None else None,
        )

    def _prompting(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        rt = session.runtime if session is not None else None
        return rt is not None and rt.running is not None and rt.running.prompting

    def _agent_turns(self, name: str) -> int:
        """Turns the agent's sessions have ended: memory's count for sessions in memory, the
        store's for the rest (without reading them all in)."""
        loaded = [s for s in self.sessions.loaded() if s.agent == name]
        (row,) = self.store.lookup(
            "SELECT COALESCE(SUM(turns), 0) AS n FROM sessions WHERE agent = ? "
            "AND id NOT IN (SELECT value FROM json_each(?))",
            (name, json.dumps([s.id for s in loaded])),
        )
        return int(row["n"]) + sum(s.turns for s in loaded)

    def _log_path(self, name: str) -> Path:
        return self.state_dir / "logs" / f"agent-{name}.log"

    async def create_agent(self, spec: m.AgentSpec) -> m.AgentInfo:
        if spec.name in self.agents or spec.name in self._creating:
            raise RpcError(
                ErrorCode.AGENT_EXISTS,
                f"an agent named {spec.name!r} exists already; change it with agent/update",
            )
        runtime = AgentRuntime(spec=spec)
        self._configure_slots(runtime)
        # It joins memory once its row is committed: a store that says no leaves nothing of it.
        self._creating.add(spec.name)
        try:
            await self._wait(self._save_agent(spec))
        finally:
            self._creating.discard(spec.name)
        self.agents[spec.name] = runtime
        self.events.emit(EventKind.AGENT_CREATED, agent=spec.name, command=spec.command)
        return self.agent_info(runtime)

    async def update_agent(self, params: m.AgentUpdateParams) -> m.AgentInfo:
        runtime = self.get_agent(params.name)
        update: dict[str, Any] = {}
        if params.command is not None:
            update["command"] = params.command
        if params.env is not None:
            update["env"] = params.env
        if params.options is not None:
            merged = runtime.spec.options.model_dump() | params.options.model_dump(
                include=params.options.model_fields_set
            )
            update["options"] = m.AgentOptions.model_validate(merged)
        if runtime.builtin and "command" in update:
            raise RpcError(
                ErrorCode.CONFLICT,
                f"agent {params.name!r} is built in: its options can change, its command cannot",
            )
        spec = runtime.spec.model_copy(update=update)
        await self._wait(self._save_agent(spec))  # refused: the agent stays as it was
        runtime.spec = spec
        for gone in self._configure_slots(runtime):
            await self._stop_process(
                runtime, gone, reason=f"by agent {runtime.name!r} having fewer processes"
            )
        if params.restart and any(slot.process is not None for slot in runtime.processes):
            await self._stop_agent_process(runtime, reason=f"by a restart of agent {runtime.name!r}")
        self.events.emit(EventKind.AGENT_UPDATED, agent=runtime.name, fields=sorted(update))
        return self.agent_info(runtime)

    async def remove_agent(self, name: str) -> None:
        runtime = self.get_agent(name)
        if runtime.builtin:
            raise RpcError(ErrorCode.CONFLICT, f"agent {name!r} is built in and cannot be removed")
        for session in [s for s in self.sessions.values() if s.agent == name and not s.closed]:
            await self.close_session(session.id)
        await self._stop_agent_process(runtime, reason=f"by the removal of agent {name!r}")
        # Refused by the store, the agent stays (its process starts again on its next turn).
        await self._wait(self.store.write(st.execute("DELETE FROM agents WHERE name=?", (name,))))
        self.agents.pop(name, None)
        self.events.emit(EventKind.AGENT_REMOVED, agent=name)

    def _save_agent(self, spec: m.AgentSpec, *, wait: bool = True) -> asyncio.Future[None] | None:
        return self.store.write(
            st.execute(
                "INSERT INTO agents (name, spec, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET spec=excluded.spec",
                (spec.name, spec.model_dump_json(), _now()),
            ),
            wait=wait,
        )

    @staticmethod
    async def _wait(future: asyncio.Future[None] | None) -> None:
        if future is not None:
            await future

    async def _ensure_process(self, runtime: AgentRuntime, slot: ProcessRuntime) -> AgentProcess:
        async with slot.start_lock:
            process = slot.process
            if process is not None and process.alive:
                return process
            spec = runtime.spec
            self._forget_live(runtime, slot)
            slot.starts += 1
            self.events.emit(
                EventKind.AGENT_PROCESS, agent=spec.name, state="starting", **_index(runtime, slot)
            )
            # The agent's process is started first, then the ACP SDK loaded (on first need) while
            # it starts up: the two take most of a first turn, and overlap here. The SDK is
            # imported on the importer's thread: other clients are answered meanwhile.
            host = self._host(spec.name)
            environment, log_path = host.child_environment(spec.env), self._log_path(spec.name)
            try:
                if spec.options.runner == "ray":  # (imports Ray: only an agent that runs there does)
                    on_ray = (await importer.load(RAY_RUNNER)).spawn_on_ray
                    spawned = await on_ray(spec.name, spec.command, environment, log_path, spec.options.ray)
                else:
                    spawned = await spawn_agent(spec.name, spec.command, environment, log_path)
            except AgentExited as exc:
                return self._crashed(runtime, slot, exc)
            try:
                agent_process: type[AgentProcess] = (await importer.load(ACP_BACKEND)).AgentProcess
            except BaseException:
                kill(spawned.proc)  # nothing will speak to it
                raise
            if runtime.builtin or runtime.takes_http_mcp:
                # Its sessions will be offered the daemon's MCP endpoint: start it while the agent
                # starts (after the ACP SDK, which the first session needs sooner).
                self.around.warm_endpoint()
            process = agent_process(
                spec.name,
                spec.command,
                spec.env,
                self._log_path(spec.name),
                host,
                self.version,
                session_timeout=spec.options.session_timeout,
                max_opening_sessions=spec.options.max_opening_sessions,
                max_live_sessions=spec.options.max_live_sessions,
            )
            slot.process = process
            try:
                await process.start(spawned)
            except (AgentExited, AgentRequestFailed, TimeoutError) as exc:
                await process.stop(grace=1.0)
                return self._crashed(runtime, slot, exc)
            slot.crashed = False
            runtime.takes_http_mcp = process.capabilities.mcp_http
            self.spawn(self._watch_process(runtime, slot, process), f"watch-{spec.name}-{slot.index}")
            self.events.emit(
                EventKind.AGENT_PROCESS,
                agent=spec.name,
                state="running",
                pid=process.pid,
                **_index(runtime, slot),
            )
            return process

    def _crashed(self, runtime: AgentRuntime, slot: ProcessRuntime, exc: Exception) -> NoReturn:
        """The agent's process could not be started, or did not answer initialize."""
        slot.crashed = True
        slot.last_error = str(exc)
        self.events.emit(
            EventKind.AGENT_PROCESS,
            agent=runtime.name,
            state="crashed",
            error=str(exc),
            **_index(runtime, slot),
        )
        raise RpcError(ErrorCode.AGENT_UNAVAILABLE, str(exc)) from None

    def _host(self, name: str) -> AgentHost:
        """What the agent's process may ask of the daemon, and where its sessions' work is told."""
        known = self.agents.get(name)
        return AgentHost(
            name,
            options=known.spec.options if known is not None else None,
            sessions=self.by_agent_session,
            activity=self.feed,
            request_permission=self.permissions.request,
            may_write=self.around.may_write,
            watched=self.events.watched,
        )

    async def _watch_process(
        self, runtime: AgentRuntime, slot: ProcessRuntime, process: AgentProcess
    ) -> None:
        await process.exited.wait()
        if slot.process is process:
            self._forget_live(runtime, slot)
        if not process.stopping:
            slot.crashed = True
            slot.last_error = process.exit_reason("its work")
            self.events.emit(
                EventKind.AGENT_PROCESS,
                agent=runtime.name,
                state="crashed",
                exitCode=process.exit_code,
                **_index(runtime, slot),
            )
        else:
            self.events.emit(
                EventKind.AGENT_PROCESS, agent=runtime.name, state="stopped", **_index(runtime, slot)
            )

    def _forget_live(self, runtime: AgentRuntime, slot: ProcessRuntime) -> None:
        """The process holds none of its sessions now (it ended, or is starting afresh)."""
        for session_id in list(slot.live):  # (one still opening there stays placed there)
            record = self.sessions.get(session_id)
            if record is not None:
                record.live = False
            runtime.unplace(session_id)

    async def _stop_agent_process(self, runtime: AgentRuntime, reason: str) -> None:
        """Stop every process of the agent, cancelling its sessions' turns."""
        for session in self.sessions.loaded():  # a session with a runtime is in memory
            if session.agent == runtime.name and session.runtime is not None:
                self._cancel_all(session, reason=reason)
        for slot in runtime.processes:
            if slot.process is not None:
                await slot.process.stop()
                self._forget_live(runtime, slot)

    async def _stop_process(self, runtime: AgentRuntime, slot: ProcessRuntime, reason: str) -> None:
        """Stop one process of the agent, cancelling the turns of the sessions placed there."""
        for session_id, at in list(runtime.placed.items()):
            session = self.sessions.get(session_id) if at is slot else None
            if session is not None and session.runtime is not None:
                self._cancel_all(session, reason=reason)
        if slot.process is not None:
            await slot.process.stop()
        self._forget_live(runtime, slot)

    # ================================================================ sessions

    def get_session(self, session_id: str) -> SessionRecord:
        try:
            return self.sessions[session_id]
        except KeyError:
            raise RpcError(
                ErrorCode.SESSION_NOT_FOUND,
                f"no session {session_id!r}; list sessions with session/list (`sessiond ls --all`)",
            ) from None

    def session_info(self, s: SessionRecord, *, brief: bool = False) -> m.SessionInfo:
        rt = s.runtime
        ins = s.insight
        plan = ins.plan_view() if ins else None
        changes = ins.changes if ins else None
        if brief:
            plan = plan.model_copy(update={"entries": []}) if plan else None
            changes = changes.model_copy(update={"files": []}) if changes else None
        return m.SessionInfo(
            kind=s.kind,
            parent=s.parent,
            last_activity=_dt(ins.last_activity) if ins and ins.last_activity else None,
            plan=plan,
            context=ins.context_view() if ins else None,
            usage=ins.usage_view() if ins else None,
            changes=changes,
            attention=list(s.flags),
            run=s.run,
            where=self._where(s),
            id=s.id,
            agent=s.agent,
            root=s.root,
            placement=s.placement,
            title=s.title,
            status=s.status,
            status_since=_dt(s.status_since),
            status_detail=s.status_detail,
            created_at=_dt(s.created_at),
            turns=s.turns,
            queued_turns=len(rt.queue) if rt else 0,
            live=s.live,
            agent_session_id=s.agent_session_id,
            last_stop_reason=s.last_stop_reason,
            last_error=s.last_error,
            recap=s.recap,
        )

    async def open_sessions(
        self,
        params: m.SessionOpenParams,
        run: str | None = None,
        *,
        kind: str = "main",
        parent: str | None = None,
    ) -> list[SessionRecord]:
        runtime = self.get_agent(params.agent)
        asked = params.placement_settings
        # A repository asked for is a worktree of it, unless another placement is asked (and refused).
        implied = "worktree" if asked is not None and asked.repository is not None else None
        placement = params.placement or implied or runtime.spec.options.default_placement
        settings = runtime.spec.options.placement_settings.model_dump()
        if placement != "worktree" and settings.get("repository"):
            settings["repository"] = None  # the agent's default repository is for its worktree sessions
        if asked is not None:
            settings |= asked.model_dump(include=asked.model_fields_set)
        root = self._root_to_open(runtime, params, settings.get("repository"))
        try:
            options = PlacementOptions.from_mapping(settings)
            await validate_placement(placement, root=root, options=options)
        except PlacementError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"placement: {exc}", {"field": "placement"}) from None
        stored_options = json.dumps(options.to_mapping()) if options.to_mapping() else None
        stored_mcp = stored_mcp_servers(params.mcp_servers)
        now = _now()
        created = []
        # Ordinals are taken now (another open may run while this one waits on the store); the
        # sessions join memory only once their rows are committed: refused, nothing is left of them.
        first = self._next_ordinal
        self._next_ordinal += params.count
        # A blank title is none: the session is named by its first prompt (titles.py); the spaces
        # around one are no part of it, as with session/rename.
        title = (params.title or "").strip() or None
        for ordinal in range(first, first + params.count):
            numbered = title
            if title is not None and params.count > 1:  # told apart in a list: "review (2 of 3)"
                numbered = f"{title} ({ordinal - first + 1} of {params.count})"
            record = SessionRecord(
                id=f"s{ordinal}",
                ordinal=ordinal,
                agent=runtime.name,
                root=root,
                placement=placement,
                title=numbered,
                status=SessionStatus.IDLE,
                status_since=now,
                created_at=now,
                run=run,
                placement_options=stored_options,
                kind=kind,
                parent=parent,
                mcp_servers=stored_mcp,
            )
            created.append(record)
        try:
            await self._wait(
                self.store.write(
                    st.executemany(
                        INSERT_SESSIONS,
                        [r.row() for r in created],
                    )
                )
            )
        except BaseException:
            if self._next_ordinal == first + params.count:
                self._next_ordinal = first  # nobody took the ones after: no gap in the ids
            raise
        for record in created:
            record.stored_activity = record.activity
            self.sessions[record.id] = record
            self._adopt(record)
        runtime.open_sessions += len(created)
        for record in created:
            self.feed.status_moved(record, None)
            self.events.emit(
                EventKind.SESSION_OPENED,
                agent=record.agent,
                session=record.id,
                root=record.root,
                placement=record.placement,
                title=record.title,
                sessionKind=record.kind,
                parent=record.parent,
            )
        return created

    @staticmethod
    def _root_to_open(runtime: AgentRuntime, params: m.SessionOpenParams, repository: str | None) -> str:
        """The root a session is opened with: a directory here, or the repository it is cloned from."""
        if repository is not None:
            if params.root is not None:
                raise RpcError(
                    ErrorCode.INVALID_PARAMS,
                    f"root: a session with a repository works in a clone of {repository!r} made where its "
                    "agent runs, not in a directory here; leave root out, or leave repository out",
                    {"field": "root"},
                )
            return repository
        root = params.root or runtime.spec.options.default_root
        if root is None:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"root: no root given and agent {runtime.name!r} has no default_root; "
                "pass an absolute directory",
                {"field": "root"},
            )
        if not os.path.isdir(root):
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"root: {root!r} is not an existing directory; create it or choose another",
                {"field": "root"},
            )
        return root

    def list_sessions(self, params: m.SessionListParams) -> m.SessionPage:
        """A page of sessions. Oldest first, the cursor is the last one's ordinal; by activity,
        most recent first, it is the last one's activity and ordinal: both stable while sessions
        come and go. A page costs the same beside ten sessions or a hundred thousand: it is read
        from the store by an index (ordinal, activity) from the cursor on, with what memory knows
        better (a session that worked since its row was stored); attention walks the flagged."""
        wanted = set(params.status) if params.status else None
        after = self._cursor(params)
        if params.attention:
            return self._page_in_memory(params, wanted, after, self.feed.flagged.values())
        if params.sort == "activity":
            return self._page_by_activity(params, wanted, after)
        return self._page_from_store(params, wanted, after)

    @staticmethod
    def _cursor(params: m.SessionListParams) -> tuple[float, int] | None:
        """Where the page starts, from the cursor: after this sort key (see `_order`)."""
        if not params.cursor:
            return None
        try:
            if params.sort == "activity":
                activity, _, ordinal = params.cursor.partition("/")
                return -float(activity), int(ordinal)
            return 0.0, int(params.cursor)
        except ValueError:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"cursor: {params.cursor!r} is not a cursor this daemon gave for sort={params.sort}; "
                "pass nextCursor back as it came, with the same sort",
                {"field": "cursor"},
            ) from None

    @staticmethod
    def _order(params: m.SessionListParams) -> Callable[[SessionRecord], tuple[float, int]]:
        """The page's sort key: oldest first, or most recent activity first (then oldest)."""
        if params.sort == "activity":
            return lambda s: (-s.activity, s.ordinal)
        return lambda s: (0.0, s.ordinal)

    @staticmethod
    def _next_cursor(params: m.SessionListParams, last: SessionRecord, key: tuple[float, int]) -> str:
        return f"{-key[0]!r}/{key[1]}" if params.sort == "activity" else str(last.ordinal)

    @staticmethod
    def _matches(params: m.SessionListParams, wanted: set[SessionStatus] | None, s: SessionRecord) -> bool:
        return (
            (params.agent is None or s.agent == params.agent)
            and (wanted is None or s.status in wanted)
            and (
                params.include_closed
                or not s.closed
                or (wanted is not None and SessionStatus.CLOSED in wanted)
            )
            and (params.kind is None or s.kind in params.kind)
            and (params.run is None or s.run == params.run)
            and (not params.attention or bool(s.flags))
        )

    def _page_in_memory(
        self,
        params: m.SessionListParams,
        wanted: set[SessionStatus] | None,
        after: tuple[float, int] | None,
        candidates: Iterable[SessionRecord],
    ) -> m.SessionPage:
        """A page of sessions that are all in memory (the flagged ones)."""
        order = self._order(params)
        matching = sorted(
            ((order(s), s) for s in candidates if self._matches(params, wanted, s)), key=lambda pair: pair[0]
        )
        rest = [pair for pair in matching if after is None or pair[0] > after]
        page = rest[: params.limit]
        return m.SessionPage(
            sessions=[self.session_info(s, brief=params.brief) for _, s in page],
            total=len(matching),
            next_cursor=self._next_cursor(params, page[-1][1], page[-1][0])
            if len(rest) > len(page)
            else None,
        )

    def _conditions(
        self, params: m.SessionListParams, wanted: set[SessionStatus] | None
    ) -> tuple[list[str], list[Any]]:
        """The SQL of the page's filters (but attention, which only memory knows)."""
        conditions: list[str] = []
        args: list[Any] = []
        if params.agent is not None:
            conditions.append("agent = ?")
            args.append(params.agent)
        if wanted is not None:
            conditions.append(f"status IN ({','.join('?' * len(wanted))})")
            args += [status.value for status in wanted]
        if not self._with_closed(params, wanted):
            conditions.append("status != 'closed'")
        if params.kind is not None:
            conditions.append(f"kind IN ({','.join('?' * len(params.kind))})")
            args += list(params.kind)
        if params.run is not None:
            conditions.append("run = ?")
            args.append(params.run)
        return conditions, args

    @staticmethod
    def _with_closed(params: m.SessionListParams, wanted: set[SessionStatus] | None) -> bool:
        return params.include_closed or (wanted is not None and SessionStatus.CLOSED in wanted)

    def _total(self, params: m.SessionListParams, wanted: set[SessionStatus] | None) -> int:
        """How many sessions match: from the fleet's tally when it can, else counted in SQL."""
        if params.agent is None and params.kind is None and params.run is None:
            by_status = self.feed.tally.by_status
            if wanted is None:
                total = sum(by_status.values())
            else:
                total = sum(by_status[status] for status in wanted if status is not SessionStatus.CLOSED)
            if self._with_closed(params, wanted):
                (row,) = self.store.lookup("SELECT COUNT(*) AS n FROM sessions")
                total += row["n"] - sum(by_status.values())  # the closed ones
            return total
        conditions, args = self._conditions(params, wanted)
        (row,) = self.store.lookup(
            f"SELECT COUNT(*) AS n FROM sessions WHERE {' AND '.join(conditions) or '1'}", tuple(args)
        )
        return int(row["n"])

    def _page_from_store(
        self, params: m.SessionListParams, wanted: set[SessionStatus] | None, after: tuple[float, int] | None
    ) -> m.SessionPage:
        """A page oldest first, read from the store's rows (an index on ordinal): its cost does not
        grow with the number of sessions; the total comes from the fleet's tally when it can."""
        conditions, args = self._conditions(params, wanted)
        where = " AND ".join(conditions) or "1"
        rows = self.store.lookup(
            f"SELECT * FROM sessions WHERE ({where}) AND ordinal > ? ORDER BY ordinal LIMIT ?",
            (*args, after[1] if after else 0, params.limit + 1),
        )
        more = len(rows) > params.limit
        # A session in memory is as memory says (its row may not be committed yet).
        page = [s for s in self.sessions.take_rows(rows[: params.limit]) if self._matches(params, wanted, s)]
        return m.SessionPage(
            sessions=[self.session_info(s, brief=params.brief) for s in page],
            total=self._total(params, wanted),
            next_cursor=str(page[-1].ordinal) if page and more else None,
        )

    def _page_by_activity(
        self, params: m.SessionListParams, wanted: set[SessionStatus] | None, after: tuple[float, int] | None
    ) -> m.SessionPage:
        """A page most recent first: the store's rows down the activity index from the cursor,
        merged with the sessions whose activity memory knows better than their row (they worked,
        or their row waits for the next commit), which are few."""
        order = self._order(params)
        moving = self.feed.moving
        for session_id, session in list(moving.items()):
            if session.activity == session.stored_activity:
                del moving[session_id]  # handed its insight, but did nothing its row does not say
        ahead = {**moving, **self._session_rows.waiting}
        mine = sorted(
            (
                (order(s), s)
                for s in ahead.values()
                if self._matches(params, wanted, s) and (after is None or order(s) > after)
            ),
            key=lambda pair: pair[0],
        )[: params.limit + 1]
        conditions, args = self._conditions(params, wanted)
        conditions.append("id NOT IN (SELECT value FROM json_each(?))")
        args.append(json.dumps(list(ahead)))
        if after is not None:
            conditions.append("(activity < ? OR (activity = ? AND ordinal > ?))")
            args += [-after[0], -after[0], after[1]]
        # Down the index from the cursor; but by the status or run index when one is asked for
        # (few sessions are working, or of one run), which SQLite would not always choose.
        walk = "INDEXED BY sessions_activity" if wanted is None and params.run is None else ""
        rows = self.store.lookup(
            f"SELECT * FROM sessions {walk} WHERE {' AND '.join(conditions)} "
            "ORDER BY activity DESC, ordinal LIMIT ?",
            (*args, params.limit + 1),
        )
        stored = [
            ((-row["activity"], row["ordinal"]), s)
            for row, s in zip(rows, self.sessions.take_rows(rows), strict=True)
            if self._matches(params, wanted, s)
        ]
        merged = sorted([*mine, *stored], key=lambda pair: pair[0])
        page = merged[: params.limit]
        more = len(merged) > params.limit
        return m.SessionPage(
            sessions=[self.session_info(s, brief=params.brief) for _, s in page],
            total=self._total(params, wanted),
            next_cursor=self._next_cursor(params, page[-1][1], page[-1][0]) if page and more else None,
        )

    @staticmethod
    def _where(s: SessionRecord) -> m.Where | None:
        if s.runtime is None:
            return None
        placement = s.runtime.placement
        worktree = as_worktree(placement)
        repository = as_repository(placement)
        return m.Where(
            placement=s.placement,
            root=placement.root,
            host=placement.host,
            description=placement.describe(),
            worktree=worktree.worktree if worktree else None,
            branch=worktree.branch if worktree else None,
            repository=repository.repository if repository else None,
        )

    async def close_session(self, session_id: str) -> SessionRecord:
        session = self.get_session(session_id)
        if session.closed:
            return session
        rt = session.runtime
        if rt is not None:
            turns = self._cancel_all(session, reason="by closing the session")
            for turn in turns:
                with contextlib.suppress(Exception):
                    await asyncio.shield(turn.future)
        # Closed in the store before anything else changes: a store that says no leaves it open.
        closing = dataclasses.replace(session, status=SessionStatus.CLOSED, status_since=_now())
        await self._wait(
            self.store.write(
                st.execute(
                    SAVE_SESSION,
                    closing.row(),
                )
            )
        )
        if session.closed:
            return session  # closed by another request meanwhile
        if rt is None and session.placement == "worktree":
            # Not yet run since a restart: its worktree may be one a daemon before made (a stop
            # keeps them), removed here as any other when nothing in it is unmerged.
            rt = self.runtime_of(session)
        kept = await rt.placement.close() if rt is not None else None
        if kept:
            session.last_error = kept
        runtime = self.agents.get(session.agent)
        if runtime is not None:
            runtime.open_sessions -= 1
            slot = runtime.placed.get(session.id)
            process = slot.process if slot is not None else None
            runtime.unplace(session.id)
            if session.live and process is not None and process.alive:
                session.live = False
                if process.capabilities.close and session.agent_session_id:
                    with contextlib.suppress(Exception):
                        await process.close_session(session.agent_session_id)
        self.feed.collisions.forget(session.id)
        self.feed.attribution.forget(session.id)
        self.feed.state_now(session)
        self.set_status(session, closed=True)
        self.events.emit(
            EventKind.SESSION_CLOSED,
            agent=session.agent,
            session=session.id,
            kept=kept,  # (what the placement kept: not the last turn's error)
        )
        # A side chat answers questions about its session alone: it goes with it (its tasks and
        # threads are work of their own, and stay).
        for child in list(self.children.get(session.id, ())):
            if child.kind == "side" and not child.closed:
                try:
                    await self.close_session(child.id)
                except RpcError as exc:  # (the store said no: it stays open, and can be closed after)
                    log.warning("closing side chat %s with %s failed: %s", child.id, session.id, exc.message)
        return session

    def reopen_session(self, session_id: str) -> SessionRecord:
        """`session/reopen`: a closed session open again as it was (its title, transcript, plan and
        changes); its next turn makes its placement afresh and asks its agent to restore the
        conversation (a new one, said in the turn's notice, when the agent cannot)."""
        session = self.get_session(session_id)
        if not session.closed:
            return session
        if self._stopping:
            raise RpcError(
                ErrorCode.DAEMON_STOPPING, "the daemon is stopping; reopen the session once it is back"
            )
        runtime = self.agents.get(session.agent)
        if runtime is None:
            raise RpcError(
                ErrorCode.AGENT_NOT_FOUND,
                f"session {session.id!r} cannot reopen: its agent {session.agent!r} was removed; "
                "open a new one with session/open (`sessiond new`)",
            )
        session.runtime = None  # (its placement was closed: the next turn makes it again)
        # What its close said it kept (a worktree) is taken up again: its error is its last turn's.
        (last,) = self.store.lookup(
            "SELECT (SELECT error FROM turns WHERE session = ? ORDER BY queued_at DESC LIMIT 1) AS error",
            (session.id,),
        )
        session.last_error = last["error"]
        runtime.open_sessions += 1
        self.set_status(session, closed=False)
        self.events.emit(
            EventKind.SESSION_REOPENED,
            agent=session.agent,
            session=session.id,
            info=self.session_info(session).model_dump(mode="json", by_alias=True, exclude_none=True),
        )
        return session

    def retitle(self, session: SessionRecord, title: str, source: str) -> None:
        """Give a session a title of the daemon's, from its first prompt or its agent, if it may
        have one from there (titles.may_give): stored with its row, told as `session.titled`."""
        if title == session.title or not titles.may_give(session.title_from, session.title, source):
            return
        self._titled(session, title, source)

    def rename(self, params: m.SessionRenameParams) -> SessionRecord:
        """`session/rename`: a title of the client's, which the daemon and the agent leave alone."""
        session = self.get_session(params.session)
        title = params.title.strip()
        if not title:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "title: it is blank; give the session a name with words in it",
                {"field": "title"},
            )
        if title != session.title or session.title_from is not None:  # (now the client's either way)
            self._titled(session, title, None)
        return session

    def _titled(self, session: SessionRecord, title: str, source: str | None) -> None:
        session.title, session.title_from = title, source
        self.events.emit(EventKind.SESSION_TITLED, agent=session.agent, session=session.id, title=title)
        self._save_session(session)

    def _save_session(self, session: SessionRecord) -> None:
        """Store the session's row as it is when the batch commits: saved three times in one turn
        of the loop (queued, working, live), it is written once."""
        self._session_rows.save(session.id, session)

    def _sessions_stored(self, sessions: list[SessionRecord]) -> None:
        for s in sessions:  # stored as memory knows it: a page by activity may read its row
            s.stored_activity = s.activity
            self.feed.moving.pop(s.id, None)

    def _save_turn(self, turn: Turn) -> None:
        """Store the turn's row as it is when the batch commits: queued, started and ended before
        one commit, it is written once (a client's turn id may name an older turn: by the object)."""
        self._turn_rows.save(id(turn), turn)

    def set_status(self, session: SessionRecord, *, closed: bool | None = None) -> None:
        """The session's status as its turns and permissions make it now (`closed` True closes it,
        False opens it again, None keeps it as it is), told and stored when it changed."""
        rt = session.runtime
        running = rt.running if rt else None
        # A turn waiting for an agent slot or a live-session slot is queued (and says for what): working
        # means the agent has it, or will within this turn of the loop (a turn handed over, nothing
        # in its way, is not shown queued for that moment: it was an event and a row for every turn).
        waiting = running is not None and running.waiting_for is not None
        status = derive_status(
            closed=session.closed if closed is None else closed,
            waiting_for_person=bool(rt and rt.permissions),
            running=running is not None and not waiting,
            queued=bool(rt and (rt.queue or waiting)),
            last=session.last_outcome,
        )
        detail = (
            running.waiting_for
            if running is not None and status is SessionStatus.QUEUED
            else _silence(session, running)
            if running is not None and status is SessionStatus.WORKING
            else None
        )
        old = session.status
        if status is old and detail == session.status_detail:
            self.feed.refresh_flags(session)
            return
        session.status = status
        session.status_detail = detail
        if status is not old:
            session.status_since = _now()
        self.events.emit(
            EventKind.SESSION_STATUS,
            agent=session.agent,
            session=session.id,
            status=status.value,
            since=session.status_since,
            **({"detail": detail} if detail else {}),
        )
        self._save_session(session)
        self.feed.status_moved(session, old)

    # ================================================================ a session's controls

    def _open_for_controls(self, session_id: str) -> SessionRecord:
        session = self.get_session(session_id)
        if session.closed:
            raise RpcError(
                ErrorCode.SESSION_CLOSED,
                f"session {session.id!r} is closed; its mode and options no longer apply",
            )
        return session

    def _live_at_agent(self, session: SessionRecord) -> tuple[AgentProcess, str] | None:
        """The agent's process and its id for the session, while the agent holds it open."""
        agent = self.agents.get(session.agent)
        slot = agent.placed.get(session.id) if agent is not None else None
        if slot is None or slot.process is None or session.agent_session_id is None:
            return None
        return (slot.process, session.agent_session_id) if session.id in slot.live else None

    async def set_mode(self, params: m.SessionSetModeParams) -> m.SessionControls:
        """Choose a session's mode: kept with it, and said to the agent now if it holds it open."""
        session = self._open_for_controls(params.session)
        offered = self.feed.controls(session)
        ids = [mode.id for mode in offered.modes]
        if offered.source != "none" and params.mode not in ids:
            said = f"offers the modes {', '.join(ids)}" if ids else "offers no modes"
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"agent {session.agent!r} {said} for session {session.id}, not {params.mode!r}",
                {"modes": ids},
            )
        live = self._live_at_agent(session)
        if live is not None:
            process, agent_session_id = live
            try:
                await process.set_mode(agent_session_id, params.mode)
            except AgentRequestFailed as exc:
                raise RpcError(
                    ErrorCode.AGENT_ERROR, f"agent {session.agent!r} refused the mode: {exc}"
                ) from None
            if session.offer is not None:
                session.offer.mode = params.mode
        session.chosen().mode = params.mode
        await self._wait(self.store.write(st.execute(UPDATE_SESSION, session.changes())))
        self.feed.controls_changed(session)
        return self.feed.controls(session)

    async def set_config_option(self, params: m.SessionSetConfigParams) -> m.SessionControls:
        """Set one of a session's config options: kept with it, said to the agent now if live."""
        session = self._open_for_controls(params.session)
        offered = self.feed.controls(session)
        ids = [str(option.get("id")) for option in offered.config_options]
        if offered.source != "none":
            option = next((o for o in offered.config_options if o.get("id") == params.config_id), None)
            if option is None:
                said = f"offers the options {', '.join(ids)}" if ids else "offers no config options"
                raise RpcError(
                    ErrorCode.INVALID_PARAMS,
                    f"agent {session.agent!r} {said} for session {session.id}, not {params.config_id!r}",
                    {"options": ids},
                )
            problem = value_problem(option, params.value)
            if problem is not None:
                raise RpcError(ErrorCode.INVALID_PARAMS, f"option {params.config_id!r}: {problem}")
        live = self._live_at_agent(session)
        if live is not None:
            process, agent_session_id = live
            try:
                options = await process.set_config_option(agent_session_id, params.config_id, params.value)
            except AgentRequestFailed as exc:
                raise RpcError(
                    ErrorCode.AGENT_ERROR, f"agent {session.agent!r} refused the option: {exc}"
                ) from None
            if session.offer is not None:
                session.offer.take_options(options)
                session.offer.set_value(params.config_id, params.value)
        session.chosen().config[params.config_id] = params.value
        await self._wait(self.store.write(st.execute(UPDATE_SESSION, session.changes())))
        self.feed.controls_changed(session)
        return self.feed.controls(session)

    # ================================================================ turns

    async def prompt(
        self, params: m.SessionPromptParams, listener: Callable[[str, dict[str, Any]], None] | None = None
    ) -> m.TurnResult:
        session = self.get_session(params.session)
        if session.runtime is None and (module := PLACEMENT_MODULES.get(session.placement)):
            await importer.load(module)  # (`runtime_of` makes the placement, on the loop's thread)
        if session.closed:
            raise RpcError(
                ErrorCode.SESSION_CLOSED,
                f"session {session.id!r} is closed; reopen it with session/reopen (`sessiond reopen "
                f"{session.id}`), or open a new one with session/open (`sessiond new`)",
            )
        if self._stopping:
            raise RpcError(
                ErrorCode.DAEMON_STOPPING, "the daemon is stopping; send the prompt again once it is back"
            )
        agent = self.get_agent(session.agent)
        check_prompt_size(params.prompt, agent.spec)  # before anything is stored
        if (reason := self.around.over_budget(session)) is not None:
            raise RpcError(ErrorCode.LIMIT_REACHED, reason)
        rt = self.runtime_of(session)
        if session.title is None and (title := titles.shortened(params.prompt)) is not None:
            self.retitle(session, title, titles.PROMPT)
        turn = Turn(
            id=params.turn_id or f"t-{uuid.uuid4().hex[:12]}",
            session=session.id,
            prompt=params.prompt,
            queued_at=_now(),
            future=asyncio.get_running_loop().create_future(),
        )
        if listener is not None:
            turn.listeners.append(listener)
        self._save_turn(turn)
        rt.queue.append(turn)
        turn.queued_seq = self.events.emit(
            EventKind.TURN_QUEUED, agent=agent.name, session=session.id, turn=turn.id, prompt=turn.prompt
        ).seq
        self._pump(session)
        self.set_status(session)
        # The turn belongs to the daemon, not to this request: a client that
        # goes away leaves it running, and its outcome is stored.
        try:
            result = await asyncio.shield(turn.future)
        except RpcError:
            await self.events.stored()
            raise
        # Answered once the turn's events are stored: whoever reads the log (or the session's
        # transcript) after the answer finds the whole turn. Only a turn's answer waits so: an
        # answer read from memory that waited could reach a client after newer events, and undo
        # what they said in its view of the session.
        await self.events.stored()
        return result

    def runtime_of(self, session: SessionRecord) -> SessionRuntime:
        if session.runtime is None:
            stored = session.placement_options
            options = PlacementOptions.from_mapping(json.loads(stored) if stored and stored != "{}" else {})
            placement = make_placement(
                session.placement,
                root=session.root,
                # Unique beyond this store: a worktree branch outlives the store that named it.
                session_id=f"{session.id}-{int(session.created_at * 1000) % 100_000_000:08d}",
                options=options,
                daemon_dirs=self.daemon_dirs,
            )
            session.runtime = SessionRuntime(placement=placement)
        return session.runtime

    def _pump(self, session: SessionRecord) -> None:
        rt = session.runtime
        if rt is None or rt.running is not None or not rt.queue:
            return
        turn = rt.queue.popleft()
        rt.running = turn
        turn.task = self.spawn(self._run_turn(session, turn), f"turn-{turn.id}")

    def start_in_background(
        self, session: SessionRecord, prompt: str, refused: Callable[[RpcError], None] | None = None
    ) -> None:
        """Queue a turn nobody waits for here: its outcome is in the session and the event log.
        `refused` hears why, when the turn is refused before it is queued (a budget, a closed session)."""

        async def run() -> None:
            started = False

            def heard(what: str, data: dict[str, Any]) -> None:
                nonlocal started
                started = True  # a turn that started tells its own end

            try:
                await self.prompt(m.SessionPromptParams(session=session.id, prompt=prompt), heard)
            except RpcError as exc:
                if refused is not None and not started:
                    refused(exc)

        self.spawn(run(), f"background-{session.id}")

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run_turn(self, session: SessionRecord, turn: Turn) -> None:
        agent = self.get_agent(session.agent)
        error: RpcError | None = None
        stop_reason: str | None = None
        try:
            turn.inner = asyncio.create_task(self._drive(agent, session, turn), name=f"drive-{turn.id}")
            try:
                stop_reason = await turn.inner
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                # Only cancel_turn cancels the inner task: that is a cancelled turn.
                stop_reason = "cancelled"
            if turn.limit is not None:
                raise RpcError(ErrorCode.LIMIT_REACHED, f"the turn was stopped: {turn.limit}")
        except RpcError as exc:
            error = exc
        except Exception as exc:
            log.exception("turn %s failed", turn.id)
            error = RpcError(ErrorCode.INTERNAL_ERROR, f"the daemon failed while running the turn: {exc}")
        finally:
            current = asyncio.current_task()
            if turn.touched and not (current is not None and current.cancelling()):
                # Its changes are current when its answer (and turn.ended) goes out.
                with contextlib.suppress(Exception):
                    if await self.feed.settle_changes(session):
                        turn.touched = False
            self._finish(session, turn, stop_reason, error)
            async with agent.turn_ended:
                agent.turn_ended.notify_all()
            async with self.turn_end:
                self.turn_end.notify_all()

    async def _drive(self, agent: AgentRuntime, session: SessionRecord, turn: Turn) -> str:
        if agent.slots is not None:
            slot = agent.slots
            if slot.locked():
                turn.waiting_for = (
                    f"waiting for an agent slot: agent {agent.name!r} runs at most "
                    f"{agent.spec.options.max_active_turns} turns at once (maxActiveTurns)"
                )
                self.set_status(session)
            try:
                await slot.acquire()
            finally:
                turn.waiting_for = None
            turn.slot = slot
        try:
            return await self._drive_started(agent, session, turn)
        finally:
            if turn.slot is not None:
                turn.slot.release()
                turn.slot = None

    @contextlib.asynccontextmanager
    async def slot_lent(self, session_id: str | None) -> AsyncIterator[None]:
        """While a session's running turn waits on other turns (its threads), its agent slot is
        theirs: with max_active_turns=1 they could not start otherwise. Taken back after."""
        session = self.sessions.get(session_id) if session_id is not None else None
        turn = session.runtime.running if session is not None and session.runtime is not None else None
        slot = turn.slot if turn is not None else None
        if turn is None or slot is None:
            yield
            return
        turn.slot = None
        slot.release()
        try:
            yield
        finally:
            current = asyncio.current_task()
            # A wait called off (its tool call cancelled) does not queue for a slot again: the turn
            # goes on without one rather than hold up its cancelling. Cancelled while queued, it
            # holds none and releases none.
            if current is None or not current.cancelling():
                await slot.acquire()
                if turn.future.done():
                    slot.release()  # the turn ended meanwhile: nobody would release it
                else:
                    turn.slot = slot

    async def _drive_started(self, agent: AgentRuntime, session: SessionRecord, turn: Turn) -> str:
        turn.started_at = _now()
        agent.active_turns += 1
        self._save_turn(turn)
        self.events.emit(EventKind.TURN_STARTED, agent=agent.name, session=session.id, turn=turn.id)
        turn.notify("started", {})
        self.set_status(session)
        if self.first_turn_at is None:
            self.first_turn_at = turn.started_at
        await self.feed.load_transcript(session, before=turn.queued_seq)
        ins = self.feed.of(session)
        ins.turn_began(turn.started_at)
        ins.add_text(turn.prompt)
        ins.transcript.feed("user", turn.id, turn.prompt + "\n")
        timeout = agent.spec.options.turn_timeout
        try:
            # Bringing up the placement, the agent and its session have deadlines of their own;
            # turn_timeout is the agent's time on the prompt.
            await self._prepare_placement(session)
            await self.feed.start_tracking(session)
            slot = agent.place(session.id, near=session.fork_from)
            try:
                process, agent_session_id = await self._open_for_turn(agent, slot, session, turn)
            except BaseException:
                if session.id not in slot.live:
                    agent.unplace(session.id)  # it opened nowhere: its next turn chooses again
                raise
            turn.prompting = True
            text = turn.prompt
            if session.preface is not None and not session.forked:
                text = f"{session.preface}\n\n{turn.prompt}"
            session.preface = None
            turn.log_says = log = process.log_reader()
            rt = session.runtime
            assert rt is not None
            rt.unsettled = True  # until the prompt ends well (_ensure_live)
            ins.prompted()
            try:
                outcome = await process.prompt(
                    agent_session_id, text, timeout=timeout, grace=CANCEL_GRACE, log=log
                )
                rt.unsettled = outcome.stop_reason == "cancelled"
            except PromptOverdue:
                raise RpcError(
                    ErrorCode.TURN_TIMEOUT,
                    f"the turn ran past the agent's turn_timeout of {timeout:g} s and was cancelled; "
                    f"raise it with agent/update if the work needs longer",
                ) from None
            turn.usage = outcome.usage
            return outcome.stop_reason
        except (AgentExited, TimeoutError) as exc:
            raise RpcError(ErrorCode.AGENT_UNAVAILABLE, str(exc)) from None
        except AgentRequestFailed as exc:
            raise RpcError(
                ErrorCode.AGENT_ERROR,
                f"agent {agent.name!r}: {exc}",
                {"agentCode": exc.code, "agentData": exc.data},
            ) from None
        finally:
            turn.prompting = False
            agent.active_turns -= 1

    async def _open_for_turn(
        self, agent: AgentRuntime, slot: ProcessRuntime, session: SessionRecord, turn: Turn
    ) -> tuple[AgentProcess, str]:
        """The process for the turn and the session's id there, opened or restored if need be. A
        process that ends before the session is open there (killed while it waited its turn to be
        opened, say) is started again, once: nothing of the turn but the opening was asked of it."""
        for attempt in (1, 2):
            process = await self._process_for(agent, slot, session, turn)
            await self._make_where_the_agent_runs(session, process)
            try:
                return process, await self._ensure_live(agent, slot, process, session)
            except AgentExited as exc:
                if attempt == 2 or session.id in slot.live or turn.cancel_requested:
                    raise
                log.info("%s: its agent's process ended before it opened there (%s); again", session.id, exc)
        raise AssertionError("unreachable")

    async def _process_for(
        self, agent: AgentRuntime, slot: ProcessRuntime, session: SessionRecord, turn: Turn
    ) -> AgentProcess:
        """The agent's process for a turn. A Ray-run agent's new process waits for a node with room:
        meanwhile the turn shows queued, saying for what."""
        options = agent.spec.options
        if options.runner != "ray" or slot.running:
            return await self._ensure_process(agent, slot)
        turn.waiting_for = (
            f"waiting for a node of the Ray cluster with room for agent {agent.name!r} "
            f"({ray_request(options.ray)}), for at most {options.ray.start_timeout:g} s"
        )
        self.set_status(session)
        try:
            return await self._ensure_process(agent, slot)
        finally:
            turn.waiting_for = None
            self.set_status(session)

    async def _ensure_live(
        self, agent: AgentRuntime, slot: ProcessRuntime, process: AgentProcess, session: SessionRecord
    ) -> str:
        """The agent's id for this session, opening or restoring it at the process first if needed."""
        unsettled = session.runtime is not None and session.runtime.unsettled
        if session.runtime is not None:
            session.runtime.unsettled = False
        if session.id in slot.live and session.agent_session_id:
            if not (unsettled and self._can_evict(process)):
                slot.live.move_to_end(session.id)
                return session.agent_session_id
            await self._reopen_at_agent(slot, process, session)
        if session.agent_session_id is not None:
            self.feed.of(session).reopened_at_agent()
        placement = session.runtime.placement if session.runtime is not None else None
        # A root on this machine's filesystem must be where the agent's process runs too.
        local_root = placement.root if placement is not None and placement.host is None else None
        if local_root is not None and (problem := await process.root_problem(local_root)) is not None:
            raise RpcError(ErrorCode.PLACEMENT_FAILED, problem)
        if placement is not None and (terminals := process.terminals()) is not None:
            await placement.run_commands_with(terminals)  # where the process runs, where the placement allows
        if cap := process.live_cap:
            # Room is made, and the place taken, one session at a time; the openings themselves
            # go on side by side (as many as the agent is asked at once).
            async with slot.room_lock:
                await self._make_room(agent, slot, process, cap, session)
                slot.opening.add(session.id)
        try:
            mcp = await self.around.mcp_servers(session, self.socket_path, http=process.capabilities.mcp_http)
            with self._opening(agent, process, session):
                await self._open_or_restore(agent, process, session, mcp)
            agent.opened(session.id, slot)
            if (window := process.context_window) is not None:
                self.feed.of(session).assume_window(window)
            if process.cost_is_session_total:
                self.feed.of(session).cost_is_whole(session.cost_copied or 0.0)
        finally:
            if cap:
                slot.opening.discard(session.id)
                if session.id not in slot.live:  # (it failed: its place is free again)
                    async with agent.turn_ended:
                        agent.turn_ended.notify_all()
        session.live = True
        self._save_session(session)
        assert session.agent_session_id is not None  # (named by the agent above)
        return session.agent_session_id

    async def _open_or_restore(
        self, agent: AgentRuntime, process: AgentProcess, session: SessionRecord, mcp: list[Any]
    ) -> None:
        """Open the session at the agent, or restore it there (a new conversation when it cannot),
        with its options and choices said."""
        rt = session.runtime
        assert rt is not None
        if session.agent_session_id is None:
            agent_session_id, setup = await self._open_at_agent(
                agent, process, session, rt.placement.root, mcp
            )
            # What the agent sent of a fork before its answer named it is the main session's
            # history replayed (opencode), not this turn's: heard as history, as a load's is.
            rt.loading = session.forked
            try:
                self._known_at_agent(agent, process, session, agent_session_id)
            finally:
                rt.loading = False
            await self._apply_options(
                agent, process, session, agent_session_id, setup, side=session.kind == "side"
            )
        elif (restored := await self._restore_at_agent(agent, process, session, mcp)) is not None:
            # The agent kept its own settings: only what was chosen for the session is said again.
            await self._apply_choices(process, session, session.agent_session_id, restored)
        else:
            # The agent cannot restore it: start afresh and say so.
            old = session.agent_session_id
            agent_session_id, setup = await process.new_session(rt.placement.root, mcp)
            self.by_agent_session.pop((agent.name, old), None)
            self._known_at_agent(agent, process, session, agent_session_id)
            await self._apply_options(agent, process, session, agent_session_id, setup)

    @contextlib.contextmanager
    def _opening(self, agent: AgentRuntime, process: AgentProcess, session: SessionRecord) -> Iterator[None]:
        """While the session's opening at the agent waits for others to be opened first
        (maxOpeningSessions; the agent's process says when: OPENING_WAIT), it shows queued, saying
        so, not working."""
        turn = session.runtime.running if session.runtime is not None else None
        if turn is None or process.opening_at_once is None:
            yield
            return
        why = (
            f"opening at agent {agent.name!r}, which is asked to open {process.opening_at_once} "
            f"sessions at a time (maxOpeningSessions)"
        )

        def waiting(now: bool) -> None:
            if now and turn.waiting_for is None:
                turn.waiting_for = why
            elif not now and turn.waiting_for == why:
                turn.waiting_for = None
            else:
                return
            self.set_status(session)

        told = OPENING_WAIT.set(waiting)
        try:
            yield
        finally:
            OPENING_WAIT.reset(told)

    def _known_at_agent(
        self, agent: AgentRuntime, process: AgentProcess, session: SessionRecord, agent_session_id: str
    ) -> None:
        """The agent holds the session by this id: its updates reach the session from now on, those
        it sent before the answer that named the id was read too (they come in the same read)."""
        session.agent_session_id = agent_session_id
        self.by_agent_session[(agent.name, agent_session_id)] = session
        process.known(agent_session_id)

    async def _restore_at_agent(
        self, agent: AgentRuntime, process: AgentProcess, session: SessionRecord, mcp: list[Any]
    ) -> SessionSetup | None:
        """session/resume, else session/load, of a session the agent no longer holds live: what the
        agent says of it; None, with the running turn's notice saying why, when it cannot (a new
        conversation follows)."""
        rt = session.runtime
        assert rt is not None
        assert session.agent_session_id is not None
        caps = process.capabilities
        if not caps.resume and not caps.load_session:
            why = "no session/resume or session/load"
        else:
            method = "session/resume" if caps.resume else "session/load"
            rt.loading = not caps.resume
            # Known before it answers: what it replays of the session is heard as history.
            self._known_at_agent(agent, process, session, session.agent_session_id)
            try:
                if caps.resume:
                    return await process.resume_session(session.agent_session_id, rt.placement.root, mcp)
                loaded = await process.load_session(session.agent_session_id, rt.placement.root, mcp)
                if process.replays_after_load:
                    await _replay_heard(rt)
                return loaded
            except AgentRequestFailed as exc:
                # E.g. an agent killed before it saved the conversation: it has nothing to load.
                why = f"its {method} failed: {exc}"
            finally:
                rt.loading = False
        if rt.running is not None:
            rt.running.notice = (
                f"agent {agent.name!r} could not restore the session ({why}): "
                f"this turn started a new conversation without the earlier history"
            )
        return None

    async def _open_at_agent(
        self, agent: AgentRuntime, process: AgentProcess, session: SessionRecord, cwd: str, mcp: list[Any]
    ) -> tuple[str, SessionSetup]:
        """session/new; or, for a side chat, session/fork of its main session where the agent can."""
        main = self.sessions.get(session.fork_from) if session.fork_from else None
        if main is not None and main.agent_session_id and process.capabilities.fork and main.live:
            try:
                forked_id, setup = await process.fork_session(main.agent_session_id, cwd, mcp)
                session.forked = True
                if process.cost_is_session_total:  # (its totals count what it copied)
                    session.cost_copied = main.insight.cost() if main.insight is not None else 0.0
                return forked_id, setup
            except (AgentRequestFailed, TimeoutError) as exc:
                log.info("fork of %s failed (%s): the side chat gets an account instead", main.id, exc)
        return await process.new_session(cwd, mcp)

    async def _apply_options(
        self,
        agent: AgentRuntime,
        process: AgentProcess,
        session: SessionRecord,
        agent_session_id: str,
        setup: SessionSetup,
        *,
        side: bool = False,
    ) -> None:
        """The agent's own mode and config options on a session it opened, then what was chosen for
        the session (which wins)."""
        options = agent.spec.options
        offer = offer_of(setup)
        # A side chat that may not write keeps out of the agent's mode (acceptEdits, say, where
        # Claude Code writes unasked): it opens in the agent's default or read-only mode.
        held = side and not self.around.may_write(session)
        if options.mode is not None and not held:
            await process.set_mode(agent_session_id, options.mode)
            offer.mode = options.mode
        config: dict[str, str | bool] = {
            config_id: value
            for config_id, value in options.config.items()
            if not (held and setup.config.get(config_id, {}).get("category") == "mode")
        }
        model = options.side_model if side and options.side_model else options.model
        if model is not None:
            model_option = next(
                (cid for cid, opt in setup.config.items() if opt.get("category") == "model"), None
            )
            if model_option is None:
                raise AgentRequestFailed(
                    f"option model={model!r} was set, but agent {agent.name!r} offers no model option"
                )
            config[model_option] = model
        for config_id, value in config.items():
            offer.take_options(await process.set_config_option(agent_session_id, config_id, value))
        if held:
            modes = read_only_modes(process.agent_name)
            session.choices = read_only(session.choices, offer, modes)
        else:
            agent.offer = offer.copy()  # what a new session of the agent starts with, shown for lazy ones
        await self._apply_choices(process, session, agent_session_id, offer)

    async def _apply_choices(
        self,
        process: AgentProcess,
        session: SessionRecord,
        agent_session_id: str,
        said: SessionSetup | Offer,
    ) -> None:
        """Say what was chosen for the session (session/setMode, setConfigOption) where the agent's
        settings differ, and keep what the agent offers it now."""
        offer = said if isinstance(said, Offer) else offer_of(said)
        chosen = session.choices
        # What the agent says of its settings while being told these (codex, resumed, answers a
        # mode set with the resumed session's defaults, the model too) is not it changing them
        # itself: the person's choices are said in full, and stay.
        wanted = (chosen.mode, dict(chosen.config)) if chosen is not None else None
        if chosen is not None and chosen.mode is not None and chosen.mode != offer.mode:
            try:
                await process.set_mode(agent_session_id, chosen.mode)
            except AgentRequestFailed as exc:
                raise AgentRequestFailed(
                    f"the mode {chosen.mode!r} chosen for session {session.id} was refused ({exc}); "
                    f"choose another with session/setMode (`sessiond mode {session.id}` lists them)",
                    exc.code,
                    exc.data,
                ) from None
            offer.mode = chosen.mode
        for config_id, value in (wanted[1] if wanted is not None else {}).items():
            current = offer.option(config_id)
            if current is not None and current.get("currentValue") == value:
                continue
            try:
                offer.take_options(await process.set_config_option(agent_session_id, config_id, value))
            except AgentRequestFailed as exc:
                raise AgentRequestFailed(
                    f"the option {config_id}={value!r} chosen for session {session.id} was refused "
                    f"({exc}); change it with session/setConfigOption (`sessiond option {session.id}` "
                    f"lists them)",
                    exc.code,
                    exc.data,
                ) from None
            offer.set_value(config_id, value)
        if chosen is not None and wanted is not None:
            chosen.mode, chosen.config = wanted[0], wanted[1]
        known = session.offer
        if known is not None:  # what an answer to resume or load left out, the agent said before
            offer.modes = offer.modes or known.modes
            offer.mode = offer.mode or known.mode
            offer.options = offer.options or known.options
            offer.commands = offer.commands or known.commands
        if offer != session.offer:  # (a session restored as it was is not news)
            session.offer = offer
            self.feed.controls_changed(session)

    def refused(self, session: SessionRecord, turn: str | None, tool_call: dict[str, Any]) -> None:
        """A person or a rule refused what the agent asked to do: the transcript says so."""
        self.feed.refused(session, turn, tool_call)

    async def _reopen_at_agent(
        self, slot: ProcessRuntime, process: AgentProcess, session: SessionRecord
    ) -> None:
        """Close a session at the agent after a prompt that did not end well, to restore it next
        (as an evicted one is) from what the agent saved of the conversation."""
        assert session.agent_session_id is not None
        slot.live.pop(session.id, None)
        session.live = False
        try:
            await process.close_session(session.agent_session_id)
        except (AgentRequestFailed, TimeoutError) as exc:
            log.info("closing %s at its agent after a turn that ended badly failed: %s", session.id, exc)

    @staticmethod
    def _can_evict(process: AgentProcess) -> bool:
        caps = process.capabilities
        return caps.close and (caps.resume or caps.load_session)

    async def _make_room(
        self,
        agent: AgentRuntime,
        slot: ProcessRuntime,
        process: AgentProcess,
        cap: int,
        incoming: SessionRecord,
    ) -> None:
        """Close the least recently used idle sessions at the process until one more fits under the cap."""
        if not self._can_evict(process):
            return
        while len(slot.live) + len(slot.opening) >= cap:
            victim = next(
                (
                    self.sessions[sid]
                    for sid in slot.live
                    if sid != incoming.id
                    and not (self.sessions[sid].runtime and self.sessions[sid].runtime.running)  # type: ignore[union-attr]
                ),
                None,
            )
            if victim is None:
                # Every live session is mid-turn: wait for one to end (the session shows it queued).
                turn = incoming.runtime.running if incoming.runtime is not None else None
                if turn is not None and turn.waiting_for is None:
                    per = " per process" if len(agent.processes) > 1 else ""
                    turn.waiting_for = (
                        f"waiting for a live-session slot: agent {agent.name!r} keeps at most {cap} "
                        f"sessions open at once{per} (maxLiveSessions), all of them mid-turn"
                    )
                    self.set_status(incoming)
                try:
                    async with agent.turn_ended:
                        await agent.turn_ended.wait()
                finally:
                    if turn is not None and turn.waiting_for is not None:
                        turn.waiting_for = None
                        self.set_status(incoming)
                continue
            agent.unplace(victim.id)
            victim.live = False
            if victim.agent_session_id:
                await process.close_session(victim.agent_session_id)
            self._save_session(victim)

    def _finish(
        self, session: SessionRecord, turn: Turn, stop_reason: str | None, error: RpcError | None
    ) -> None:
        rt = session.runtime
        assert rt is not None
        if rt.running is turn:
            rt.running = None
        ended = _now()
        text = turn.text
        if error is not None:
            session.last_outcome = Outcome.FAILED
            session.last_error = error.message
            session.last_stop_reason = None
        else:
            session.last_outcome = Outcome.CANCELLED if stop_reason == "cancelled" else Outcome.COMPLETED
            session.last_stop_reason = stop_reason
            if stop_reason != "cancelled":
                session.last_error = None
        with self.feed.counting(session) as ins:
            session.turns += 1
            if turn.started_at is not None:
                ins.turn_ended(ended, turn.usage)
                self.last_turn_end = ended
        session.last_reply = text or session.last_reply
        self.feed.state(session, EventKind.SESSION_USAGE)
        if turn.touched:
            # Only a turn that wrote, edited or ran something can have changed files.
            self.feed.changes_soon(session)
        if text.strip():
            session.recap = recap_of(text)
        turn.stop_reason, turn.error, turn.ended_at = stop_reason, error.message if error else None, ended
        self._save_turn(turn)
        data: dict[str, Any] = {"stopReason": stop_reason} if error is None else {"error": error.message}
        outcome = m.TurnOutcome.CANCELLED if stop_reason == "cancelled" else m.TurnOutcome.COMPLETED
        data["outcome"] = (m.TurnOutcome.FAILED if error else outcome).value
        if stop_reason == "cancelled" and error is None:
            data["cancelledBy"] = turn.cancel_reason or "by the agent"
        if turn.usage:
            data["usage"] = turn.usage
        if turn.notice:
            data["notice"] = turn.notice
        for line in ending_lines(data):
            ins.transcript.feed("status", turn.id, line + "\n")
        ins.transcript.end()
        self.events.emit(EventKind.TURN_ENDED, agent=session.agent, session=session.id, turn=turn.id, **data)
        turn.notify("ended", data)
        self.set_status(session)
        self._save_session(session)
        self.around.turn_finished(session, error.message if error else None)
        self.around.enforce_budget(session)
        if not turn.future.done():
            if error is not None:
                turn.future.set_exception(error)
                # Nobody may be waiting (the client went away): that is fine.
                turn.future.exception()
            else:
                turn.future.set_result(
                    m.TurnResult(
                        turn_id=turn.id,
                        session=session.id,
                        text=text,
                        stop_reason=stop_reason,
                        usage=m.TurnUsage.model_validate(turn.usage) if turn.usage else None,
                        context=ins.context_view(),
                        plan=ins.plan_view(),
                        changes=ins.changes,
                        notice=turn.notice,
                        started_at=_dt(turn.started_at or turn.queued_at),
                        ended_at=_dt(ended),
                    )
                )
        self._pump(session)

    # ---------------------------------------------------------------- cancelling

    async def cancel(self, params: m.SessionCancelParams) -> int:
        session = self.get_session(params.session)
        by = f"by a client: {params.reason}" if params.reason else "by a client"
        return len(self._cancel_all(session, reason=by, only=params.turn_id))

    def cancel_turn(self, turn_id: str) -> bool:
        for session in self.sessions.loaded():
            rt = session.runtime
            if rt is not None and (
                (rt.running is not None and rt.running.id == turn_id)
                or any(t.id == turn_id for t in rt.queue)
            ):
                return bool(self._cancel_all(session, reason="by a client", only=turn_id))
        return False

    def _cancel_all(self, session: SessionRecord, *, reason: str, only: str | None = None) -> list[Turn]:
        rt = session.runtime
        if rt is None:
            return []
        cancelled: list[Turn] = []
        for turn in list(rt.queue):
            if only is None or turn.id == only:
                rt.queue.remove(turn)
                turn.cancel_requested = True
                turn.cancel_reason = reason
                cancelled.append(turn)
                self._finish_queued(session, turn)
        running = rt.running
        if running is not None and (only is None or running.id == only) and not running.cancel_requested:
            running.cancel_requested = True
            running.cancel_reason = reason
            cancelled.append(running)
            self.spawn(self._stop_running(session, running), f"cancel-{running.id}")
        return cancelled

    def _finish_queued(self, session: SessionRecord, turn: Turn) -> None:
        # A queued turn never reached the agent: it ends cancelled at once.
        self._finish(session, turn, "cancelled", None)

    async def _stop_running(self, session: SessionRecord, turn: Turn) -> None:
        runtime = self.agents.get(session.agent)
        slot = runtime.placed.get(session.id) if runtime is not None else None
        process = slot.process if slot is not None else None
        agent_session_id = session.agent_session_id
        prompting = turn.prompting and process is not None and agent_session_id is not None
        if process is not None and agent_session_id is not None and turn.prompting:
            # ACP's order: session/cancel first, then answer what the agent
            # still waits on as cancelled, so it ends the turn as cancelled.
            await process.cancel(agent_session_id)
        if session.runtime is not None:
            for pending in list(session.runtime.permissions.values()):
                if not pending.future.done():
                    pending.future.set_result(None)
        if prompting:
            if turn.task is not None:
                done, _ = await asyncio.wait({turn.task}, timeout=CANCEL_GRACE)
                if done:
                    return
            log.warning(
                "agent did not end turn %s within %s s of session/cancel; ending it", turn.id, CANCEL_GRACE
            )
        if turn.inner is not None and not turn.inner.done():
            turn.inner.cancel()

    # ================================================================ the agent's calls

    # ---------------------------------------------------------------- insight

    async def _prepare_placement(self, session: SessionRecord) -> None:
        rt = self.runtime_of(session)
        try:
            await rt.placement.prepare()
        except PlacementError as exc:
            raise _placement_failed(session, exc) from None

    async def _make_where_the_agent_runs(self, session: SessionRecord, process: AgentProcess) -> None:
        """A worktree of a repository is made (or moved) where the agent's process runs, now that it
        is known; its changes are counted there from then on."""
        rt = self.runtime_of(session)
        repository = as_repository(rt.placement)
        if repository is None:
            return
        try:
            notice = await repository.make_at(process.machine())
        except PlacementError as exc:
            raise _placement_failed(session, exc) from None
        if notice is not None and rt.running is not None:
            rt.running.notice = notice if rt.running.notice is None else f"{rt.running.notice}; {notice}"
        await self.feed.start_tracking(session)

    # ================================================================ merging

    # ================================================================ status and stopping

    async def shutdown(self) -> None:
        """Cancel every turn (stop reason cancelled), stop every agent, flush the store."""
        self._stopping = True
        waiting: list[Turn] = []
        for session in self.sessions.loaded():
            if session.runtime is not None:
                waiting += self._cancel_all(session, reason="by the daemon stopping")
        if waiting:
            await asyncio.wait([asyncio.shield(t.future) for t in waiting], timeout=CANCEL_GRACE + 2)
        for session in self.sessions.loaded():
            if session.runtime is not None:
                with contextlib.suppress(Exception):
                    await session.runtime.placement.stop()
        await self.merging.close()
        # The agents first, then the MCP endpoint: an agent's open streams to it (claude-agent-acp
        # keeps one per live session) end with the agent, not after the endpoint's grace.
        await asyncio.gather(
            *(
                slot.process.stop(grace=SHUTDOWN_GRACE)
                for runtime in self.agents.values()
                for slot in runtime.processes
                if slot.process is not None
            ),
            return_exceptions=True,
        )
        await self.around.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.feed.throttle.flush()
        await self.store.flush()
