"""What the core keeps in memory about agents, sessions and turns.

A session that has never run costs one small slotted record; everything a
running session needs (its queue, terminals) lives in a `SessionRuntime`
made on its first turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiond.daemon.changes import CountsChanges
from sessiond.daemon.controls import Choices, Offer
from sessiond.daemon.insight import Insight
from sessiond.daemon.placements import Placement
from sessiond.daemon.states import Outcome
from sessiond.protocol.models import AgentSpec, Attention, SessionStatus

if TYPE_CHECKING:
    from sessiond.daemon.acp_backend import AgentProcess

log = logging.getLogger("sessiond.core")

# A session's stored row, in the sessions table's column order (row() below).
SESSION_COLUMNS = 23
INSERT_SESSIONS = f"INSERT INTO sessions VALUES ({','.join('?' * SESSION_COLUMNS)})"
SAVE_SESSION = f"INSERT OR REPLACE INTO sessions VALUES ({','.join('?' * SESSION_COLUMNS)})"
# A stored session's columns that change after it is opened (the others never do): an UPDATE of
# these leaves the indexes on agent, parent and run alone, where a REPLACE rewrites the row.
UPDATE_SESSION = (
    "UPDATE sessions SET title = ?, status = ?, status_since = ?, turns = ?, agent_session_id = ?, "
    "last_stop_reason = ?, last_error = ?, recap = ?, choices = ?, activity = ?, title_from = ?, "
    "cost_copied = ? WHERE id = ?"
)


# A turn's row as it is now: inserted by its first write, updated by the later ones (the same turn:
# a client's turn id that names an older turn's row leaves that row alone).
UPSERT_TURN = (
    "INSERT INTO turns (id, session, prompt, state, text, stop_reason, error, usage, queued_at, started_at, "
    "ended_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
    "text = excluded.text, stop_reason = excluded.stop_reason, error = excluded.error, "
    "usage = excluded.usage, started_at = excluded.started_at, ended_at = excluded.ended_at "
    "WHERE turns.session = excluded.session AND turns.queued_at = excluded.queued_at"
)


@dataclass(slots=True)
class SessionRecord:
    id: str
    ordinal: int
    agent: str
    root: str
    placement: str
    title: str | None
    status: SessionStatus
    status_since: float
    created_at: float
    turns: int = 0
    agent_session_id: str | None = None
    last_stop_reason: str | None = None
    last_error: str | None = None
    recap: str | None = None
    last_outcome: Outcome = Outcome.NONE
    live: bool = False
    run: str | None = None
    placement_options: str | None = None
    kind: str = "main"
    parent: str | None = None
    # Side chats: read-only unless asked, and how they start from their main session.
    writable: bool = True
    fork_from: str | None = None
    preface: str | None = None
    forked: bool = False
    last_reply: str | None = None
    runtime: SessionRuntime | None = None
    insight: Insight | None = None
    flags: tuple[Attention, ...] = ()  # its attention flags as last worked out (the fleet counts them)
    status_detail: str | None = None  # why it is queued: the limit its turn waits on
    choices: Choices | None = None  # the mode and config a person chose for it (stored)
    mcp_servers: str | None = None  # its client's own MCP servers, as JSON (stored; given at every open)
    offer: Offer | None = None  # what its agent offers it, as the agent last said (not stored)
    stored_activity: float | None = None  # its activity as its stored row has it (None: not known)
    # Where its title came from: its first prompt or its agent (titles.py); None, the client that
    # opened it (or none yet). Only a title the daemon gave may be given anew.
    title_from: str | None = None
    # A side chat forked at an agent whose cost is the session's whole total (opencode): its main
    # session's cost at the fork, which the fork's totals include (stored; None: not such a fork).
    cost_copied: float | None = None

    @property
    def closed(self) -> bool:
        return self.status is SessionStatus.CLOSED

    @property
    def activity(self) -> float:
        """When it last did something: the later of its status's last change and its agent's last
        word (or its turn's start or end). What sort=activity orders by; stored with its row, so
        a restart finds it as it was."""
        ins = self.insight
        if ins is not None and ins.last_activity is not None and ins.last_activity > self.status_since:
            return ins.last_activity
        return self.status_since

    def changes(self) -> tuple[Any, ...]:
        """The values of UPDATE_SESSION."""
        return (
            self.title,
            self.status.value,
            self.status_since,
            self.turns,
            self.agent_session_id,
            self.last_stop_reason,
            self.last_error,
            self.recap,
            self.choices.dumps() if self.choices else None,
            self.activity,
            self.title_from,
            self.cost_copied,
            self.id,
        )

    def chosen(self) -> Choices:
        """Its choices, made on first need (most sessions never have any)."""
        if self.choices is None:
            self.choices = Choices()
        return self.choices

    def row(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.ordinal,
            self.agent,
            self.root,
            self.placement,
            self.title,
            self.status.value,
            self.status_since,
            self.created_at,
            self.turns,
            self.agent_session_id,
            self.last_stop_reason,
            self.last_error,
            self.recap,
            self.run,
            self.placement_options,
            self.kind,
            self.parent,
            self.choices.dumps() if self.choices else None,
            self.mcp_servers,
            self.activity,
            self.title_from,
            self.cost_copied,
        )


@dataclass
class Turn:
    id: str
    session: str
    prompt: str
    queued_at: float
    future: asyncio.Future[Any]
    started_at: float | None = None
    parts: list[str] = field(default_factory=list)
    # A tool call or a thought came since the reply's last words: its next words are a new message.
    between_messages: bool = False
    usage: dict[str, int] | None = None
    cancel_requested: bool = False
    prompting: bool = False
    task: asyncio.Task[None] | None = None
    inner: asyncio.Task[Any] | None = None
    listeners: list[Any] = field(default_factory=list)
    limit: str | None = None  # why a budget ended it
    touched: bool = False  # it wrote, edited or ran something: its changes need counting
    queued_seq: int = 0  # the seq of its turn.queued event
    slot: asyncio.Semaphore | None = None  # the agent slot it holds while it runs (max_active_turns)
    waiting_for: str | None = None  # the limit it waits on (an agent slot, a live-session slot)
    cancel_reason: str | None = None  # who or what cancelled it ("by a client", "the session was closed")
    notice: str | None = None  # what a person should know of how it ran (its session could not be restored)
    # What the agent's log says since the turn was sent (the process's reader), for a silent turn.
    log_says: Callable[[], str | None] | None = None
    # Its row in the store, as the next commit writes it (`Core._save_turn`): row() below.
    stop_reason: str | None = None
    error: str | None = None
    ended_at: float | None = None

    def row(self) -> tuple[Any, ...]:
        """The values of UPSERT_TURN: its state (queued, running, done or failed), and the text and
        usage once it has ended."""
        ended = self.ended_at is not None
        if ended:
            state = "failed" if self.error is not None else "done"
        else:
            state = "running" if self.started_at is not None else "queued"
        return (
            self.id,
            self.session,
            self.prompt,
            state,
            self.text if ended else None,
            self.stop_reason,
            self.error,
            str(self.usage) if ended and self.usage is not None else None,
            self.queued_at,
            self.started_at,
            self.ended_at,
        )

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def said(self, text: str) -> str:
        """Add the agent's words to the reply, as said: a new message, after a tool call or a
        thought, is a paragraph of its own (agents send their messages' text with nothing
        between them: "Writing the notes." then, after the write, "All done.")."""
        if self.between_messages and self.parts:
            so_far = "".join(self.parts[-2:])  # enough to count the line breaks it ends with
            text = "\n" * (2 - len(so_far) + len(so_far.rstrip("\n"))) + text.lstrip("\n")
        self.between_messages = False
        self.parts.append(text)
        return text

    def notify(self, what: str, data: dict[str, Any]) -> None:
        """Tell the turn's listeners (the request that asked for it) what happened."""
        for listener in self.listeners:
            try:
                listener(what, data)
            except Exception:
                log.exception("a turn listener failed")


@dataclass
class PendingPermission:
    id: str
    agent: str
    session: str
    turn: str | None
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    future: asyncio.Future[str | None]


@dataclass
class SessionRuntime:
    placement: Placement
    queue: deque[Turn] = field(default_factory=deque)
    running: Turn | None = None
    permissions: dict[str, PendingPermission] = field(default_factory=dict)
    loading: bool = False  # what the agent says of it now is history it replays (session/load)
    replaying: asyncio.Event | None = None  # set as the agent says something of it while loading
    # Its last prompt at the agent did not end well (cancelled, failed, overdue): the agent's own
    # state of the conversation is not to be trusted (claude-agent-acp answers the next prompt
    # with the cancelled one's leftovers, and every later one with the answer to the one before),
    # so its next turn closes it at the agent and restores it from what the agent saved.
    unsettled: bool = False
    tracker: CountsChanges | None = None
    changes_wanted: bool = False
    changes_task: asyncio.Task[None] | None = None
    changes_sleeping: bool = False  # the changes task waits out its interval (a turn's end cuts it short)


@dataclass(eq=False)
class ProcessRuntime:
    """One of an agent's processes (`options.processes` of them): the process while it runs, and
    the sessions it holds."""

    index: int
    process: AgentProcess | None = None
    start_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    room_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Sessions open at this process now, least recently used first.
    live: OrderedDict[str, None] = field(default_factory=OrderedDict)
    # Sessions being opened here under a live cap: each holds its place (room_lock made it).
    opening: set[str] = field(default_factory=set)
    placed: int = 0  # sessions placed here: open, or opening (what "least loaded" counts)
    starts: int = 0
    last_error: str | None = None
    crashed: bool = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive


@dataclass
class AgentRuntime:
    spec: AgentSpec
    builtin: bool = False
    processes: list[ProcessRuntime] = field(default_factory=lambda: [ProcessRuntime(0)])
    # The process each session is placed at, from its first turn there until the process no
    # longer holds it open (evicted, closed, or the process ended): it stays there meanwhile.
    placed: dict[str, ProcessRuntime] = field(default_factory=dict)
    slots: asyncio.Semaphore | None = None
    turn_ended: asyncio.Condition = field(default_factory=asyncio.Condition)
    takes_http_mcp: bool = False  # as its last process said (ACP mcpCapabilities.http)
    active_turns: int = 0
    open_sessions: int = 0
    offer: Offer | None = None  # what it offered the last session it opened (shown for the others)

    @property
    def name(self) -> str:
        return self.spec.name

    def place(self, session_id: str, near: str | None = None) -> ProcessRuntime:
        """The process for a session's turn: where it is placed already; else where `near` (the
        main session of a side chat, which forks from it there) is; else the least loaded."""
        if (here := self.placed.get(session_id)) is not None:
            return here
        chosen = self.placed.get(near) if near is not None else None
        if chosen is None:
            chosen = min(self.processes, key=lambda p: (p.placed, not p.running, p.index))
        self.placed[session_id] = chosen
        chosen.placed += 1
        return chosen

    def opened(self, session_id: str, at: ProcessRuntime) -> None:
        """The session is open at `at`'s process now (and placed there, should a close or an end of
        a process have taken it away meanwhile)."""
        if self.placed.get(session_id) is not at:
            self.unplace(session_id)
            self.placed[session_id] = at
            at.placed += 1
        at.live[session_id] = None

    def unplace(self, session_id: str) -> None:
        """The session is open at no process now: its next turn may go to another."""
        if (was := self.placed.pop(session_id, None)) is not None:
            was.placed -= 1
            was.live.pop(session_id, None)

    def resize(self, count: int) -> list[ProcessRuntime]:
        """`count` processes from now on; those beyond it are returned, for stopping."""
        while len(self.processes) < count:
            self.processes.append(ProcessRuntime(len(self.processes)))
        gone, self.processes = self.processes[count:], self.processes[:count]
        return gone
