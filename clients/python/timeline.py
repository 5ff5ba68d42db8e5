"""A run's (or any selection's) timeline, read from the event log alone.

Pure: events in, a model out. Each session is a row; each turn a span from
``turn.queued`` through ``turn.started`` to ``turn.ended``, with the time it
spent waiting for an agent slot, a live-session slot or a person (a
permission request) as waits of their own, its tool calls, its plan progress
and changed-file counts as they stood when it ended. Nothing here asks the
daemon: a run read again after restarts gives the same model, because the
events are the same.

``timeline_html`` draws the model as one self-contained HTML page;
``timeline_perfetto`` writes it as Chrome trace-event JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sessiond.protocol.models import Event, RunInfo

WaitKind = Literal["agent", "live", "opening", "person"]
Outcome = Literal["completed", "failed", "cancelled", "interrupted", "running", "queued"]

OUTCOMES: tuple[Outcome, ...] = ("completed", "failed", "cancelled", "interrupted", "running", "queued")
WAIT_NAMES: dict[WaitKind, str] = {
    "agent": "waiting for an agent slot (maxActiveTurns)",
    "live": "waiting for a live-session slot (maxLiveSessions)",
    "opening": "waiting for the agent to open others first (maxOpeningSessions)",
    "person": "waiting for a person (permission)",
}


@dataclass
class Wait:
    kind: WaitKind
    start: float
    end: float | None = None
    what: str = ""  # the permission's question, the limit's sentence

    @property
    def seconds(self) -> float:
        return max((self.end or self.start) - self.start, 0.0)


@dataclass
class Tool:
    id: str
    title: str
    kind: str
    start: float
    end: float | None = None
    status: str = "pending"


@dataclass
class TurnSpan:
    id: str
    session: str
    queued: float
    started: float | None = None
    ended: float | None = None
    outcome: Outcome = "queued"
    detail: str = ""  # the error, or who cancelled it
    prompt: str = ""
    waits: list[Wait] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    chunks: list[float] = field(default_factory=list)
    plan_done: int | None = None
    plan_total: int | None = None
    files: int | None = None
    added: int | None = None
    removed: int | None = None
    last_seen: float = 0.0  # the time of its newest event (where an interrupted turn is drawn to end)

    @property
    def running_seconds(self) -> float:
        """From its start to its end: what it adds to the serial time (an interrupted turn adds nothing,
        as in the daemon's own count: its end was never seen)."""
        if self.started is None or self.ended is None or self.outcome == "interrupted":
            return 0.0
        return max(self.ended - self.started, 0.0)

    def waited(self, kind: WaitKind) -> float:
        return sum(w.seconds for w in self.waits if w.kind == kind)


@dataclass
class SessionRow:
    id: str
    agent: str
    placement: str = "?"
    title: str = ""
    kind: str = "main"
    opened: float | None = None
    closed: float | None = None
    turns: list[TurnSpan] = field(default_factory=list)
    plan_done: int | None = None
    plan_total: int | None = None
    plan_current: str | None = None
    files: int | None = None
    added: int | None = None
    removed: int | None = None

    @property
    def group(self) -> tuple[str, str]:
        return (self.agent, self.placement)

    @property
    def first(self) -> float:
        return min([t.queued for t in self.turns] or [self.opened or 0.0])


@dataclass
class Timeline:
    sessions: list[SessionRow]
    start: float  # the left edge: the run's start, else the first event drawn
    end: float  # the right edge: the run's end, else the last event
    title: str = "sessiond timeline"
    run: RunInfo | None = None
    events: int = 0

    @property
    def turns(self) -> list[TurnSpan]:
        return [t for s in self.sessions for t in s.turns]

    @property
    def serial_seconds(self) -> float:
        """What the turns would have taken one after another (their start → end, added up)."""
        return sum(t.running_seconds for t in self.turns)

    @property
    def span_seconds(self) -> float:
        """From the first turn queued to the last one ended, as the log has them."""
        turns = self.turns
        if not turns:
            return 0.0
        first = min(t.queued for t in turns)
        last = max(t.ended or t.last_seen or t.queued for t in turns)
        return max(last - first, 0.0)

    @property
    def wall_seconds(self) -> float:
        """The run's wall time (from its stored start and end, as `sessiond runs` says it) when a run is
        drawn, else the span of its turns."""
        return self.run.wall_seconds if self.run is not None else round(self.span_seconds, 3)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        for turn in self.turns:
            counts[turn.outcome] += 1
        return counts

    def waited(self) -> dict[WaitKind, float]:
        return {kind: sum(t.waited(kind) for t in self.turns) for kind in WAIT_NAMES}

    def groups(self) -> list[tuple[tuple[str, str], list[SessionRow]]]:
        found: dict[tuple[str, str], list[SessionRow]] = {}
        for row in self.sessions:
            found.setdefault(row.group, []).append(row)
        return list(found.items())


# ---------------------------------------------------------------- reading events


@dataclass(frozen=True, slots=True)
class _E:
    seq: int
    kind: str
    time: float
    agent: str | None
    session: str | None
    turn: str | None
    data: Mapping[str, Any]


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    raise ValueError(f"an event time that is not a time: {value!r}")


def _normal(event: Event | Mapping[str, Any]) -> _E:
    if isinstance(event, Event):
        return _E(
            event.seq,
            str(event.kind),
            event.time.timestamp(),
            event.agent,
            event.session,
            event.turn,
            event.data,
        )
    return _E(
        int(event.get("seq", 0)),
        str(event["kind"]),
        _epoch(event["time"]),
        event.get("agent"),
        event.get("session"),
        event.get("turn"),
        event.get("data") or {},
    )


def _first_line(text: str, limit: int = 120) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _Builder:
    def __init__(self, keep_chunks: bool) -> None:
        self.keep_chunks = keep_chunks
        self.sessions: dict[str, SessionRow] = {}
        self.turns: dict[str, TurnSpan] = {}
        self.open_wait: dict[str, Wait] = {}  # session -> its slot wait now open
        self.permissions: dict[str, Wait] = {}
        self.tools: dict[tuple[str, str], Tool] = {}
        self.first: float | None = None
        self.last: float | None = None
        self.count = 0

    def row(self, e: _E) -> SessionRow | None:
        if e.session is None:
            return None
        row = self.sessions.get(e.session)
        if row is None:
            row = self.sessions[e.session] = SessionRow(e.session, e.agent or "?")
        return row

    def current(self, row: SessionRow, *, started: bool) -> TurnSpan | None:
        """The session's turn a session-wide event belongs to: the running one (started), or the
        first still waiting to start."""
        for turn in row.turns:
            if turn.ended is None and (turn.started is not None) == started:
                return turn
        return None

    def latest(self, row: SessionRow) -> TurnSpan | None:
        started = [t for t in row.turns if t.started is not None]
        return started[-1] if started else None

    def close_wait(self, session: str, at: float) -> None:
        wait = self.open_wait.pop(session, None)
        if wait is not None and wait.end is None:
            wait.end = max(at, wait.start)

    def feed(self, e: _E, *, counted: bool = True) -> None:
        if counted:
            self.count += 1
            self.first = e.time if self.first is None else min(self.first, e.time)
            self.last = e.time if self.last is None else max(self.last, e.time)
        row = self.row(e)
        if row is None:
            return
        turn = self.turns.get(e.turn) if e.turn else None
        if turn is None and e.turn and e.kind in ("turn.started", "turn.ended"):
            # A selection that begins mid-turn: it was queued before the first event read.
            turn = self.turns[e.turn] = TurnSpan(e.turn, row.id, e.time, last_seen=e.time)
            row.turns.append(turn)
        if turn is not None and e.kind != "turn.ended":
            turn.last_seen = max(turn.last_seen, e.time)
        data = e.data
        kind = e.kind
        if kind == "session.opened":
            row.placement = str(data.get("placement") or row.placement)
            row.title = str(data.get("title") or "")
            row.kind = str(data.get("sessionKind") or "main")
            row.opened = e.time
        elif kind == "session.closed":
            row.closed = e.time
        elif kind == "turn.queued":
            turn = TurnSpan(
                e.turn or f"?{e.seq}", row.id, e.time, prompt=_first_line(str(data.get("prompt", "")))
            )
            turn.last_seen = e.time
            self.turns[turn.id] = turn
            row.turns.append(turn)
        elif kind == "turn.started" and turn is not None:
            self.close_wait(row.id, e.time)
            turn.started = e.time
            turn.outcome = "running"
        elif kind == "turn.ended" and turn is not None:
            self.end_turn(row, turn, e)
        elif kind == "session.status":
            self.status(row, e)
        elif kind == "permission.asked":
            target = turn or self.current(row, started=True)
            if target is not None:
                call = data.get("toolCall") or {}
                wait = Wait("person", e.time, what=str(call.get("title") or "a permission request"))
                target.waits.append(wait)
                self.permissions[str(data.get("permission"))] = wait
        elif kind == "permission.answered":
            answered = self.permissions.pop(str(data.get("permission")), None)
            if answered is not None:
                answered.end = max(e.time, answered.start)
                answer = data.get("optionId")
                answered.what += f" → {answer if answer is not None else 'cancelled'}"
        elif kind == "turn.tool":
            self.tool(row, turn, e)
        elif kind == "turn.chunk":
            target = turn or self.current(row, started=True)
            if target is not None and self.keep_chunks:
                target.chunks.append(e.time)
        elif kind == "session.plan":
            plan = data.get("plan") or {}
            row.plan_done, row.plan_total = int(plan.get("done", 0)), int(plan.get("total", 0))
            row.plan_current = plan.get("current")
            target = self.current(row, started=True) or self.latest(row)
            if target is not None:
                target.plan_done, target.plan_total = row.plan_done, row.plan_total
        elif kind == "session.changes":
            changes = data.get("changes") or {}
            row.files = len(changes.get("files") or [])
            row.added, row.removed = int(changes.get("added", 0)), int(changes.get("removed", 0))
            # Counted after a turn that wrote something: that turn's (the newest started).
            target = self.current(row, started=True) or self.latest(row)
            if target is not None:
                target.files, target.added, target.removed = row.files, row.added, row.removed

    def status(self, row: SessionRow, e: _E) -> None:
        detail = str(e.data.get("detail") or "")
        if "agent slot" in detail:
            kind: WaitKind | None = "agent"
            turn = self.current(row, started=False)
        elif "live-session slot" in detail:
            kind = "live"
            turn = self.current(row, started=True)
        elif "(maxOpeningSessions)" in detail:
            kind = "opening"
            turn = self.current(row, started=True)
        else:
            kind, turn = None, None
        opened = self.open_wait.get(row.id)
        if opened is not None and (kind is None or opened.kind != kind):
            self.close_wait(row.id, e.time)
            opened = None
        if kind is not None and turn is not None and opened is None:
            wait = Wait(kind, e.time, what=detail)
            turn.waits.append(wait)
            self.open_wait[row.id] = wait

    def tool(self, row: SessionRow, turn: TurnSpan | None, e: _E) -> None:
        turn = turn or self.current(row, started=True)
        if turn is None:
            return
        data = e.data
        key = (turn.id, str(data.get("toolCallId")))
        tool = self.tools.get(key)
        if tool is None:
            tool = Tool(
                key[1], str(data.get("title") or "tool call"), str(data.get("toolKind") or ""), e.time
            )
            self.tools[key] = tool
            turn.tools.append(tool)
        if data.get("title"):
            tool.title = str(data["title"])
        status = str(data.get("status") or tool.status)
        tool.status = status
        if status in ("completed", "failed") and tool.end is None:
            tool.end = max(e.time, tool.start)

    def end_turn(self, row: SessionRow, turn: TurnSpan, e: _E) -> None:
        data = e.data
        said = str(data.get("outcome") or ("failed" if data.get("error") else "completed"))
        turn.outcome = next((o for o in OUTCOMES if o == said), "failed")
        if turn.outcome == "interrupted":
            # Told when the daemon started again: the turn stopped when the daemon did, after its
            # newest event (not at the restart, which may be a week later).
            turn.ended = max(turn.last_seen, turn.started or turn.queued)
        else:
            turn.ended = e.time
        turn.detail = str(data.get("error") or data.get("cancelledBy") or data.get("stopReason") or "")
        end = turn.ended
        for wait in turn.waits:
            if wait.end is None:
                wait.end = max(end, wait.start)
        for tool in turn.tools:
            if tool.end is None:
                tool.end = max(end, tool.start)
        if self.open_wait.get(row.id) in turn.waits:
            self.open_wait.pop(row.id, None)


def build(
    events: Iterable[Event | Mapping[str, Any]],
    *,
    run: RunInfo | None = None,
    title: str | None = None,
    chunks: bool = False,
    since_time: float | None = None,
) -> Timeline:
    """The timeline of `events` (in seq order, as `trace` gives them). With `run`, its edges are the
    run's start and end and its header figures the run's own; `chunks` keeps each reply chunk's time;
    `since_time` (epoch seconds) keeps only what happened from then on (and the sessions it touched)."""
    builder = _Builder(keep_chunks=chunks)
    for raw in events:
        event = _normal(raw)
        if since_time is not None and event.time < since_time:
            if event.kind == "session.opened":  # where an older session runs is still worth knowing
                builder.feed(event, counted=False)
            continue
        builder.feed(event)
    rows = [
        row
        for row in builder.sessions.values()
        if row.turns or (row.opened is not None and (since_time is None or row.opened >= since_time))
    ]
    order = {group: i for i, group in enumerate(dict.fromkeys(r.group for r in sorted(rows, key=_first)))}
    rows.sort(key=lambda r: (order[r.group], r.first, r.id))
    first = builder.first if builder.first is not None else 0.0
    last = builder.last if builder.last is not None else first
    # A turn still going is drawn to the newest event.
    for turn in (t for r in rows for t in r.turns):
        if turn.ended is None:
            for wait in turn.waits:
                if wait.end is None:
                    wait.end = max(last, wait.start)
    # The edges: the turns as drawn (an interrupted one to its last event, not to the restart that
    # told of it, which may be days later), the run's own start and end around them.
    turns = [t for r in rows for t in r.turns]
    start = min([r.first for r in rows] or [first])
    end = max([t.ended or t.last_seen for t in turns] + [r.opened for r in rows if r.opened] or [last])
    if any(t.ended is None for t in turns):
        end = max(end, last)  # still going: to the newest event
    if run is not None:
        start = min(start, run.started_at.timestamp())
        if run.ended_at is None:
            end = max(end, last)
        elif not any(t.outcome == "interrupted" for t in turns):
            end = max(end, run.ended_at.timestamp())
    name = title or (f"run {run.name} ({run.id})" if run is not None else "sessiond timeline")
    return Timeline(rows, start, max(end, start), name, run, builder.count)


def _first(row: SessionRow) -> float:
    return row.first
