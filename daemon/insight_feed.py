"""Session insight, fed: what agents report and do becomes each session's plan, context,
usage, changed files, transcript and attention flags, and the fleet summary; with
their state events, at most `state_rate` times a second each.

The core owns sessions and turns and hands this what happens to them; the
pure model it fills is insight.py, the changed files come from changes.py.
What it reads of the core and asks of it is `FeedPort`; the budget it checks as
usage grows is `enforce_budget`, handed in (it is `Around`'s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack

from sessiond.daemon import store as st
from sessiond.daemon import titles
from sessiond.daemon.attribution import EARLY_RUN, Attribution
from sessiond.daemon.changes import ChangeTracker
from sessiond.daemon.controls import UPDATE_KINDS, Choices, Offer, controls_info, controls_wire
from sessiond.daemon.events import EventLog
from sessiond.daemon.insight import (
    TRANSCRIPT_KINDS,
    TRANSCRIPT_LINES,
    Insight,
    TranscriptBuilder,
    replay,
)
from sessiond.daemon.placements import Placement, as_repository, as_worktree
from sessiond.daemon.placements.collisions import Collisions
from sessiond.daemon.records import SAVE_SESSION, AgentRuntime, SessionRecord, SessionRuntime
from sessiond.daemon.session_table import SessionTable
from sessiond.daemon.store import Store
from sessiond.daemon.throttle import Throttle
from sessiond.protocol import models as m
from sessiond.protocol.models import EventKind, SessionStatus

log = logging.getLogger("sessiond.insight")

CHANGES_INTERVAL = 1.0  # a burst of edits is counted once a second
SETTLE_TIMEOUT = 30.0  # how long a turn's end waits for its changes to be counted
ATTENTION_INTERVAL = 2.0  # how often the flags that come with time are checked
STATE_KINDS = (EventKind.SESSION_PLAN, EventKind.SESSION_USAGE, EventKind.SESSION_CHANGES)


def _command_key(tool_call_id: str) -> str:
    """The attribution window of an `execute` tool call (a terminal's is `term:<id>`)."""
    return f"tool:{tool_call_id}"


@dataclass
class FleetTally:
    """The fleet summary's sums, kept up to date as sessions change, so that a summary
    costs the same with ten sessions or a hundred thousand (closed ones count too)."""

    by_status: Counter[SessionStatus] = field(default_factory=Counter)  # open sessions only
    attention: Counter[m.Attention] = field(default_factory=Counter)  # flags of open sessions
    turns: int = 0
    cost: float = 0.0
    serial: float = 0.0
    closed: int = 0  # closed sessions in the store (until a prune)

    def moved(self, old: SessionStatus | None, new: SessionStatus | None) -> None:
        """A session went from status `old` to `new` (None: not there; closed ones are counted apart)."""
        if old is SessionStatus.CLOSED:
            self.closed -= 1
        elif old is not None:
            self.by_status[old] -= 1
        if new is SessionStatus.CLOSED:
            self.closed += 1
        elif new is not None:
            self.by_status[new] += 1

    def open_by_status(self) -> dict[SessionStatus, int]:
        return {status: n for status, n in self.by_status.items() if n > 0}

    def flagged(self, old: Iterable[m.Attention], new: Iterable[m.Attention]) -> None:
        self.attention.subtract(old)
        self.attention.update(new)


class FeedPort(Protocol):
    """What the feed reads of the core (the store, the log, sessions, agents, when turns ran)
    and asks of it (a task it owns); the core is one."""

    @property
    def store(self) -> Store: ...
    @property
    def events(self) -> EventLog: ...
    @property
    def sessions(self) -> SessionTable: ...
    @property
    def agents(self) -> Mapping[str, AgentRuntime]: ...
    @property
    def first_turn_at(self) -> float | None: ...
    @property
    def last_turn_end(self) -> float | None: ...
    def get_session(self, session_id: str) -> SessionRecord: ...
    def retitle(self, session: SessionRecord, title: str, source: str) -> None: ...
    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...


class InsightFeed:
    def __init__(
        self,
        core: FeedPort,
        *,
        state_rate: float,
        enforce_budget: Callable[[SessionRecord], None],
        on_silence: Callable[[SessionRecord], None],
    ) -> None:
        self.core = core
        self._enforce_budget = enforce_budget  # past a budget, the session's tree stops (usage grew)
        # A turn's agent fell silent, or spoke again: the core says so in the session's status.
        self._on_silence = on_silence
        self.store = core.store
        self.events = core.events
        # A session's state events go out at most state_rate times a second each.
        self.throttle = Throttle(1.0 / state_rate)
        self.collisions = Collisions()
        self.tally = FleetTally()
        # The first start and last end of the turns stored before this daemon started, read by
        # `load` (the fleet's wall time spans them, as its turns and busy time count them).
        self._stored_span: tuple[float | None, float | None] = (None, None)
        # The sessions whose flags may come with time (a turn or plan under way, or flagged): the
        # attention watch walks these, not every session (idle ones cost it nothing).
        self.watched: dict[str, SessionRecord] = {}
        # The sessions with an attention flag: what an attention page walks.
        self.flagged: dict[str, SessionRecord] = {}
        # The sessions whose activity may have moved since their row was last stored (their
        # insight was handed out): a page by activity takes these from memory, the rest from
        # the store's index. The core drops a session from here as it stores its row.
        self.moving: dict[str, SessionRecord] = {}
        self.attribution = Attribution(core.spawn, self._attributed)

    def load(self) -> None:
        """The latest plan, usage and changes of each session, from the last such events stored;
        and the span of the turns stored."""
        self._stored_span = (
            self._turn_time("started_at", "ORDER BY rowid"),
            self._turn_time("ended_at", "ORDER BY rowid DESC"),
        )
        kinds = [k.value for k in STATE_KINDS]
        rows = self.store.query(
            "SELECT e.session, e.kind, e.time, e.data FROM events e JOIN ("
            "  SELECT session, kind, MAX(seq) AS seq FROM events"
            f"  WHERE kind IN ({','.join('?' * len(kinds))}) GROUP BY session, kind"
            ") last ON e.seq = last.seq",
            kinds,
        )
        self.core.sessions.load_many({row["session"] for row in rows})
        for row in rows:
            session = self.core.sessions.get(row["session"])
            if session is None:
                continue
            ins = self.of(session)
            data = msgpack.unpackb(row["data"], raw=False)
            if row["kind"] == EventKind.SESSION_PLAN and data.get("plan"):
                ins.set_plan(data["plan"].get("entries", []), row["time"])
            elif row["kind"] == EventKind.SESSION_USAGE:
                ins.restore_usage(data.get("context"), data.get("usage"))
            elif row["kind"] == EventKind.SESSION_CHANGES and data.get("changes"):
                ins.changes = m.Changes.model_validate(data["changes"])
        # The one pass over every session loaded (the core counts the rest in SQL): from here on
        # the tally is kept as they change.
        for session in self.core.sessions.loaded():
            self.tally.turns += session.turns
            if session.insight is not None:
                self.tally.cost += session.insight.cost()
                self.tally.serial += session.insight.busy_seconds
            self.tally.moved(None, session.status)
            self.refresh_flags(session, announce=False)

    @contextlib.contextmanager
    def counting(self, session: SessionRecord) -> Iterator[Insight]:
        """Around a change to a session's usage or turns: the fleet's sums follow it."""
        ins = self.of(session)
        turns, cost, busy = session.turns, ins.cost(), ins.busy_seconds
        try:
            yield ins
        finally:
            self.tally.turns += session.turns - turns
            self.tally.cost += ins.cost() - cost
            self.tally.serial += ins.busy_seconds - busy

    def status_moved(self, session: SessionRecord, old: SessionStatus | None) -> None:
        """The core changed the session's status from `old` (None: it is new)."""
        self.tally.moved(old, session.status)
        self.refresh_flags(session)
        self.fleet_soon()

    def refresh_flags(self, session: SessionRecord, *, announce: bool = True) -> None:
        """Work out the session's attention flags again; say so when they changed."""
        flags = () if session.closed else tuple(self.attention(session))
        if flags == session.flags:
            return
        self.tally.flagged(session.flags, flags)
        silence_moved = (m.Attention.AGENT_SILENT in flags) != (m.Attention.AGENT_SILENT in session.flags)
        session.flags = flags
        if flags:
            self.flagged[session.id] = session
        else:
            self.flagged.pop(session.id, None)
        if announce:
            self.state(session, EventKind.SESSION_ATTENTION)
            self.fleet_soon()
        if silence_moved:
            self._on_silence(session)

    def controls(self, session: SessionRecord) -> m.SessionControls:
        """What the session's agent offers it and what was chosen: as the agent said for this session,
        else as it offered its last one, else nothing yet."""
        return controls_info(*self._controls_of(session))

    def _controls_of(self, session: SessionRecord) -> tuple[Offer | None, m.ControlsSource, Choices]:
        choices = session.choices or Choices()
        if session.offer is not None:
            return session.offer, "session", choices
        agent = self.core.agents.get(session.agent)
        if agent is not None and agent.offer is not None:
            return agent.offer, "agent", choices
        return None, "none", choices

    def controls_changed(self, session: SessionRecord) -> None:
        self.events.emit(
            EventKind.SESSION_CONTROLS,
            agent=session.agent,
            session=session.id,
            controls=controls_wire(*self._controls_of(session)),
        )

    def on_update(self, session: SessionRecord, kind: str, payload: dict[str, Any]) -> None:
        if kind in UPDATE_KINDS:
            # Also outside turns and while history is replayed: the agent may say these any time.
            offer = session.offer if session.offer is not None else Offer()
            if offer.update(kind, payload):
                session.offer = offer
                if session.choices is not None and session.choices.follow(offer):
                    # The agent changed what was chosen (left plan mode, say): a restore keeps that.
                    self.store.write(st.execute(SAVE_SESSION, session.row()), wait=False)
                agent = self.core.agents.get(session.agent)
                if agent is not None and kind == "available_commands_update":
                    agent.offer = agent.offer or Offer()
                    agent.offer.commands = list(offer.commands)
                self.controls_changed(session)
            return
        if kind == "session_info_update":
            # Its own name for the session (also outside turns): a title its client gave stays.
            title = payload.get("title")
            if isinstance(title, str) and (title := titles.shortened(title)) is not None:
                self.core.retitle(session, title, titles.AGENT)
            return
        rt = session.runtime
        if rt is None or rt.loading:
            if rt is not None and rt.replaying is not None:
                rt.replaying.set()
            return  # nothing running, or history replayed by session/load: not this turn's
        turn = rt.running
        turn_id = turn.id if turn else None
        ins = self.of(session)
        now = time.time()
        ins.touch(now)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            content = payload.get("content", {})
            text = content.get("text") if isinstance(content, dict) else None
            if not text:
                return
            ins.add_text(text)
            role, event = (
                ("agent", EventKind.TURN_CHUNK)
                if kind == "agent_message_chunk"
                else ("thought", EventKind.TURN_THOUGHT)
            )
            if turn is not None and role == "agent":
                text = turn.said(text)
                turn.notify("chunk", {"text": text})
            elif turn is not None:
                turn.between_messages = True
            ins.transcript.feed(role, turn_id, text)
            self.events.emit(event, agent=session.agent, session=session.id, turn=turn_id, text=text)
        elif kind == "plan":
            ins.set_plan(list(payload.get("entries") or []), now)
            self.state(session, EventKind.SESSION_PLAN)
            self.refresh_flags(session)
        elif kind == "usage_update":
            with self.counting(session):
                ins.set_context(payload)
            self.state(session, EventKind.SESSION_USAGE)
            self.refresh_flags(session)
            self._enforce_budget(session)
        elif kind in ("tool_call", "tool_call_update"):
            # The call starts with the first word of it, whichever: gemini-cli, having asked
            # permission for a tool (the request carries the call), sends only updates of it.
            first = kind == "tool_call" or str(payload.get("toolCallId", "")) not in ins.tools
            call = ins.tool_update(payload)
            if turn is not None:
                turn.between_messages = True
            rt = session.runtime
            title = call.shown_title(rt.placement.root if rt is not None else session.root)
            if title:
                ins.transcript.tool(turn_id, call.id, m.tool_line(call.kind, title, call.status), first=first)
            # This update's own diffs, for clients that show them (the ACP face passes them on).
            diffs = [
                {"path": c["path"], "oldText": c.get("oldText"), "newText": c.get("newText", "")}
                for c in payload.get("content") or []
                if isinstance(c, dict) and c.get("type") == "diff" and c.get("path")
            ]
            self.events.emit(
                EventKind.TURN_TOOL,
                agent=session.agent,
                session=session.id,
                turn=turn_id,
                toolCallId=call.id,
                title=title,
                toolKind=call.kind,
                status=call.status,
                locations=call.locations,
                first=first,
                **({"diffs": diffs} if diffs else {}),
            )
            tracker = self._shared_tracker(session)
            if tracker is not None:
                self._attribute_tool(session, tracker, call, payload)
            if call.diffs or call.kind in ("edit", "delete", "move", "execute"):
                self.touched(session)
                self.changes_soon(session)

    def refused(self, session: SessionRecord, turn_id: str | None, tool_call: dict[str, Any]) -> None:
        """A tool call whose permission was refused (by a person or a rule): its transcript line
        says so, a call the agent reports no more of (gemini-cli) too."""
        ins = self.of(session)
        call = ins.refuse(tool_call)
        if call.title:
            ins.transcript.tool(turn_id, call.id, m.tool_line(call.kind, call.title, call.status), first=True)

    def _attribute_tool(
        self, session: SessionRecord, tracker: ChangeTracker, call: Any, payload: dict[str, Any]
    ) -> None:
        """A tool call's files are the session's; an `execute` one is a command running in the root."""
        if call.kind in ("edit", "delete", "move"):
            for path in call.locations:
                self.attribution.claim(session.id, tracker, path)
        for path, _, _ in call.diffs:
            self.attribution.claim(session.id, tracker, path)
        if call.kind == "execute":
            # The agent runs it itself, perhaps before this reaches the daemon: its window reaches
            # back. One told of only once it ended (its window opens here, to close at once) may
            # have run for any part of the turn.
            key = _command_key(call.id)
            ended = call.status in ("completed", "failed")
            since = time.time() - EARLY_RUN
            turn = session.runtime.running if session.runtime is not None else None
            if ended and turn is not None and turn.started_at is not None:
                since = min(since, turn.started_at)
            self.attribution.command_started(session.id, tracker, key, ran_since=since)
            if ended:
                self.attribution.command_ended(session.id, tracker, key)

    @staticmethod
    def _shared_tracker(session: SessionRecord) -> ChangeTracker | None:
        """The session's change tracker when its working copy is shared (not a worktree)."""
        rt = session.runtime
        if rt is None or not isinstance(rt.tracker, ChangeTracker) or _own_copy(rt.placement):
            return None
        return rt.tracker

    def _attributed(self, session_id: str) -> None:
        session = self.core.sessions.get(session_id)
        if session is not None and not session.closed:
            self.changes_soon(session)

    async def command_started(self, session: SessionRecord, key: str) -> None:
        """A terminal command of the session is about to start: take the root's state first."""
        tracker = self._shared_tracker(session)
        if tracker is not None:
            with contextlib.suppress(Exception):  # a failing git is logged when the window closes
                await asyncio.shield(self.attribution.command_started(session.id, tracker, key))

    async def tool_allowed(self, session: SessionRecord, tool_call: dict[str, Any]) -> None:
        """A permission for a command was granted: it runs as soon as the agent hears so, so its
        window opens now, the root's state taken first. An agent that asks before it announces
        the call (gemini-cli sends no `tool_call` for a tool it asks about, only its end) would
        otherwise run the command with no window open, and its files count as nobody's."""
        if tool_call.get("kind") == "execute" and tool_call.get("toolCallId"):
            await self.command_started(session, _command_key(str(tool_call["toolCallId"])))

    def command_ended(self, session: SessionRecord, key: str) -> None:
        tracker = self._shared_tracker(session)
        if tracker is not None:
            self.attribution.command_ended(session.id, tracker, key)

    def command_renamed(self, session: SessionRecord, key: str, new_key: str) -> None:
        tracker = self._shared_tracker(session)
        if tracker is not None:
            self.attribution.rename(session.id, tracker, key, new_key)

    async def settle_changes(self, session: SessionRecord) -> bool:
        """At a turn's end, before its answer: count its changes now, and say so at once.
        False when they could not be counted in time (they are counted later)."""
        rt = session.runtime
        if rt is None or rt.tracker is None:
            return False
        self.attribution.end_all(session.id)
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT):
                await self.attribution.settled(session.id)
                rt.changes_wanted = False
                task = rt.changes_task
                if task is not None and not task.done():
                    if rt.changes_sleeping:
                        task.cancel()
                    await asyncio.wait({task})
                await self._compute_changes(session)
        except TimeoutError:
            log.warning(
                "counting the changes of %s took over %s s; counted later", session.id, SETTLE_TIMEOUT
            )
            return False
        self.throttle.now((session.id, EventKind.SESSION_CHANGES))
        return True

    def of(self, session: SessionRecord) -> Insight:
        """The session's insight, made on first need; whoever changes it goes through here, so
        the attention watch looks at the session from now until it has nothing under way, and
        a page by activity takes it from memory until its row is stored again."""
        if session.insight is None:
            session.insight = Insight()
        self.watched[session.id] = session
        self.moving[session.id] = session
        return session.insight

    def state(self, session: SessionRecord, kind: EventKind) -> None:
        self.throttle.request((session.id, kind), lambda: self._emit_state(session, kind))

    def state_now(self, session: SessionRecord) -> None:
        """Send the session's state events that wait for their window to end, now (a session
        closing tells its last state before it is closed, not up to a window after)."""
        for kind in (*STATE_KINDS, EventKind.SESSION_ATTENTION):
            self.throttle.now((session.id, kind))

    def _emit_state(self, session: SessionRecord, kind: EventKind) -> None:
        ins = self.of(session)
        data: dict[str, Any]
        if kind == EventKind.SESSION_PLAN:
            plan = ins.plan_view()
            data = {"plan": plan.wire() if plan else None}
        elif kind == EventKind.SESSION_USAGE:
            data = {"context": ins.context_wire(), "usage": ins.usage_wire()}
        elif kind == EventKind.SESSION_CHANGES:
            data = {"changes": ins.changes.wire() if ins.changes else None}
        else:
            data = {"attention": [a.value for a in session.flags]}
        self.events.emit(kind, agent=session.agent, session=session.id, **data)
        self.fleet_soon()

    @staticmethod
    def touched(session: SessionRecord) -> None:
        """The running turn wrote or ran something (counted again when it ends)."""
        if session.runtime is not None and session.runtime.running is not None:
            session.runtime.running.touched = True

    def wrote(self, session: SessionRecord, real_path: str, host: str | None) -> None:
        """An agent wrote a file: count the changes again, and say when two sessions edit one file."""
        self.touched(session)
        tracker = self._shared_tracker(session)
        if tracker is not None and host is None:
            self.attribution.claim(session.id, tracker, real_path)
        self.changes_soon(session)
        for collision in self.collisions.wrote(session.id, real_path, host):
            self.events.emit(
                EventKind.SESSION_COLLISION,
                agent=session.agent,
                session=session.id,
                path=collision.path,
                host=collision.host,
                sessions=[collision.first, collision.second],
                message=collision.sentence(),
            )

    def changes_soon(self, session: SessionRecord) -> None:
        """Count the session's changes again soon: one count at a time, the last after the last request."""
        rt = session.runtime
        if rt is None:
            return
        rt.changes_wanted = True
        if rt.changes_task is None or rt.changes_task.done():
            rt.changes_task = self.core.spawn(self._count_changes(session, rt), f"changes-{session.id}")

    async def _count_changes(self, session: SessionRecord, rt: SessionRuntime) -> None:
        while rt.changes_wanted:
            rt.changes_wanted = False
            await self._compute_changes(session)
            if rt.changes_wanted:
                rt.changes_sleeping = True
                try:
                    await asyncio.sleep(CHANGES_INTERVAL)  # a burst of edits is counted once a second
                finally:
                    rt.changes_sleeping = False

    async def _compute_changes(self, session: SessionRecord) -> None:
        rt, ins = session.runtime, self.of(session)
        if rt is None or rt.tracker is None:
            return
        extra = [diff for call in ins.tools.values() for diff in call.diffs]
        try:
            changes = await rt.tracker.changes(extra)
        except Exception as exc:  # git can fail on a broken repository: the turn goes on
            log.warning("could not compute the changes of %s: %s", session.id, exc)
            return
        if isinstance(rt.tracker, ChangeTracker) and not _own_copy(rt.placement):
            changes = self._own(session.id, rt.tracker, changes)
        if changes != ins.changes:
            ins.changes = changes
            self.state(session, EventKind.SESSION_CHANGES)

    def _own(self, session_id: str, tracker: ChangeTracker, changes: m.Changes) -> m.Changes:
        """Of a shared root's changes, the session's own; the rest are others'."""
        own = self.attribution.own(session_id, tracker)
        mine: list[m.ChangedFile] = []
        others: list[m.ChangedFile] = []
        for f in changes.files:
            shared = own.get(f.path, set()) | (own.get(f.old_path, set()) if f.old_path else set())
            if f.outside_root or f.path in own or (f.old_path is not None and f.old_path in own):
                update = {"shared": bool(shared), "shared_with": sorted(shared) or None}
                mine.append(f.model_copy(update=update))
            else:
                others.append(f)
        return m.Changes(
            files=mine,
            added=sum(f.added for f in mine),
            removed=sum(f.removed for f in mine),
            base=changes.base,
            others=others,
        )

    async def start_tracking(self, session: SessionRecord) -> None:
        rt = session.runtime
        if rt is None or rt.tracker is not None:
            return
        repository = as_repository(rt.placement)
        if repository is not None:
            if repository.made is not None:  # counted where it was made, against where it started
                rt.tracker = repository.tracker()
            return
        if rt.placement.host is not None:
            return  # changes on an ssh target come from the tool calls' diffs only
        ins = self.of(session)
        base = ins.changes.base if ins.changes else None
        try:
            tracker = rt.tracker = await ChangeTracker.start(rt.placement.root, base)
        except Exception as exc:
            log.warning("could not record the starting state of %s: %s", session.id, exc)
            return
        if ins.changes and not _own_copy(rt.placement):
            # After a restart: what it counted as its own before is still its own.
            for f in ins.changes.files:
                if not f.outside_root:
                    self.attribution.claim(session.id, tracker, f.path, f.shared_with or ())

    async def load_transcript(self, session: SessionRecord, before: int) -> None:
        """After a restart, number the transcript on from what the store holds before this turn."""
        ins = self.of(session)
        if ins.transcript_loaded:
            return
        ins.transcript_loaded = True
        if session.turns:
            ins.transcript = await self._stored_transcript(session.id, keep=TRANSCRIPT_LINES, upto=before - 1)

    async def _stored_transcript(
        self, session_id: str, keep: int | None, upto: int | None = None
    ) -> TranscriptBuilder:
        kinds = [k.value for k in TRANSCRIPT_KINDS]

        def read(conn: Any) -> list[tuple[str, str | None, dict[str, Any]]]:
            rows = conn.execute(
                "SELECT kind, turn, data FROM events WHERE session = ? AND seq <= ? "
                f"AND kind IN ({','.join('?' * len(kinds))}) ORDER BY seq",
                [session_id, upto if upto is not None else 2**62, *kinds],
            )
            return [(r[0], r[1], msgpack.unpackb(r[2], raw=False)) for r in rows]

        return replay(TranscriptBuilder(keep=keep), await self.store.read(read))

    async def transcript(self, params: m.TranscriptParams) -> m.Transcript:
        session = self.core.get_session(params.session)
        ins = session.insight
        if params.offset is None and ins is not None and (ins.transcript_loaded or session.turns == 0):
            # Memory reflects every event emitted so far, stored or about to be.
            head = self.events.head
            lines = ins.transcript.tail(params.limit)
            total = ins.transcript.total
        else:
            head = self.events.committed
            builder = await self._stored_transcript(session.id, keep=None, upto=head)
            everything = builder.tail(builder.total + 1)
            total = len(everything)
            start = max(total - params.limit, 0) if params.offset is None else params.offset
            lines = everything[start : start + params.limit]
        return m.Transcript(
            lines=[m.TranscriptLine.model_validate(line._asdict()) for line in lines],
            total=total,
            head=head,
        )

    def attention(self, session: SessionRecord) -> list[m.Attention]:
        ins = session.insight
        rt = session.runtime
        needs_you = bool(rt and rt.permissions)
        if ins is None:
            return [m.Attention.NEEDS_YOU] if needs_you else []
        agent = self.core.agents.get(session.agent)
        options = agent.spec.options if agent else m.AgentOptions()
        return ins.attention(
            now=time.time(),
            needs_you=needs_you,
            plan_stall=options.plan_stall_seconds,
            turn_timeout=options.turn_timeout,
            silence=options.silence_seconds,
        )

    async def watch(self) -> None:
        """Flags that come with time (a stalled plan, a long turn) are checked every few seconds."""
        while True:
            await asyncio.sleep(ATTENTION_INTERVAL)
            for session_id, session in list(self.watched.items()):
                ins = session.insight
                if ins is not None and (
                    ins.turn_started is not None or ins.in_progress_since or session.flags
                ):
                    self.refresh_flags(session)
                    if m.Attention.AGENT_SILENT in session.flags:
                        self._on_silence(session)  # what the agent's log says may have grown
                else:
                    del self.watched[session_id]  # back when `of` hands out its insight again

    def fleet(self) -> m.Fleet:
        tally = self.tally
        by_status = tally.open_by_status()
        first, last = self._turn_span()
        wall = max(last - first, 0.0) if first is not None and last is not None else 0.0
        return m.Fleet(
            open=sum(by_status.values()),
            by_status=by_status,
            working=by_status.get(SessionStatus.WORKING, 0),
            needs_you=by_status.get(SessionStatus.NEEDS_YOU, 0),
            failed=by_status.get(SessionStatus.FAILED, 0),
            attention={flag: n for flag, n in tally.attention.items() if n > 0},
            cost=round(tally.cost, 6),
            turns=tally.turns,
            serial_seconds=round(tally.serial, 3),
            wall_seconds=round(wall, 3),
        )

    def _turn_time(self, column: str, order: str) -> float | None:
        """The first turn's start, or the last one's end, in the order turns were asked (rowid):
        read at start-up from the table's end, not over every turn (a MIN and MAX of the whole
        table read 786 MiB in 1.7 s at 200,000 turns). The end is that of the last turn asked
        that ended: one asked before it that ended after it is not looked for."""
        for row in self.store.query(f"SELECT {column} FROM turns WHERE {column} IS NOT NULL {order} LIMIT 1"):
            return float(row[column])
        return None

    def _turn_span(self) -> tuple[float | None, float | None]:
        """The first turn's start and the last one's end, of every turn: those stored before this
        daemon started and those since."""
        firsts = [at for at in (self._stored_span[0], self.core.first_turn_at) if at is not None]
        lasts = [at for at in (self._stored_span[1], self.core.last_turn_end) if at is not None]
        return (min(firsts) if firsts else None, max(lasts) if lasts else None)

    def fleet_soon(self) -> None:
        self.throttle.request("fleet", lambda: self.events.emit(EventKind.FLEET, **self.fleet().wire()))


def _own_copy(placement: Placement) -> bool:
    """Whether the session has its working copy to itself (a worktree): its changes are all its own."""
    return as_worktree(placement) is not None
