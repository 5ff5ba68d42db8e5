"""What editors show about a session: plan, context fill, usage, transcript, attention.

Pure state, fed by the agent's updates and the turns' outcomes, with no I/O
and no await: the core feeds it and reads it; tests drive it directly.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sessiond.protocol import models as m

TRANSCRIPT_LINES = 2000
DEFAULT_WINDOW = 200_000
CONTEXT_HIGH = 0.8
CHARS_PER_TOKEN = 4


class Line(NamedTuple):
    n: int
    role: str
    turn: str | None
    text: str


class TranscriptBuilder:
    """Turns a stream of (role, turn, text) pieces into numbered lines.

    Pieces of one role and turn join until a newline ends the line; a new role
    or turn ends the line in progress, and the next one's line breaks before
    its first words are dropped (the paragraph break between an agent's
    messages, `Turn.said`). A tool call's line stays open until anything else
    comes, so that the call's later updates can retitle it.
    """

    def __init__(self, keep: int | None = TRANSCRIPT_LINES, start: int = 0) -> None:
        self.lines: deque[Line] = deque(maxlen=keep)
        self.total = start
        self._open: tuple[str, str | None] | None = None
        self._partial = ""
        self._call: str | None = None  # the tool call whose line is the one open

    def tool(self, turn: str | None, call: str, text: str, *, first: bool) -> None:
        """A tool call's line ("[execute] pwd"), from its first update that has a title; a later
        update of it retitles the line while nothing else has come since. claude-agent-acp and
        opencode name a call by its tool first ("Terminal", "bash") and by what it does ("pwd")
        once its input has streamed."""
        if self._call == call and self._open == ("tool", turn):
            self._partial = text
            return
        if first:
            self._close()
            self._open, self._partial, self._call = ("tool", turn), text, call

    def feed(self, role: str, turn: str | None, text: str) -> list[Line]:
        done: list[Line] = []
        if self._open != (role, turn):
            done += self._close()
            text = text.lstrip("\n")
            if not text:
                return done
        self._open = (role, turn)
        self._partial += text
        *complete, self._partial = self._partial.split("\n")
        for piece in complete:
            done.append(self._add(role, turn, piece))
        return done

    def end(self) -> list[Line]:
        """Close the line in progress (at the end of a turn)."""
        return self._close()

    def _close(self) -> list[Line]:
        self._call = None
        if self._open is None:
            return []
        role, turn = self._open
        self._open = None
        if not self._partial:
            return []
        line = self._add(role, turn, self._partial)
        self._partial = ""
        return [line]

    def _add(self, role: str, turn: str | None, text: str) -> Line:
        line = Line(self.total, role, turn, text)
        self.total += 1
        self.lines.append(line)
        return line

    def tail(self, count: int) -> list[Line]:
        lines = list(self.lines)[-count:]
        if self._open is not None and self._partial:
            role, turn = self._open
            lines = [*lines, Line(self.total, role, turn, self._partial)][-count:]
        return lines


def replay(
    builder: TranscriptBuilder, events: Iterable[tuple[str, str | None, dict[str, Any]]]
) -> TranscriptBuilder:
    """Feed stored events (kind, turn, data), in order, to `builder` as they were fed live."""
    refused: set[str] = set()  # tool calls whose permission was refused (by a person or a rule)
    for kind, turn, data in events:
        if kind == m.EventKind.TURN_QUEUED:
            builder.feed("user", turn, str(data.get("prompt", "")) + "\n")
        elif kind == m.EventKind.TURN_CHUNK:
            builder.feed("agent", turn, str(data.get("text", "")))
        elif kind == m.EventKind.TURN_THOUGHT:
            builder.feed("thought", turn, str(data.get("text", "")))
        elif kind == m.EventKind.TURN_TOOL and data.get("title"):
            call = str(data.get("toolCallId", ""))
            status = "refused" if call in refused else data.get("status")
            line = m.tool_line(data.get("toolKind"), str(data["title"]), status)
            builder.tool(turn, call, line, first=bool(data.get("first")))
        elif kind == m.EventKind.PERMISSION_ANSWERED and isinstance(asked := data.get("toolCall"), dict):
            call = str(asked.get("toolCallId", ""))
            refused.add(call)
            if asked.get("title"):
                line = m.tool_line(asked.get("kind"), str(asked["title"]), "refused")
                builder.tool(turn, call, line, first=True)
        elif kind == m.EventKind.TURN_ENDED:
            for line in ending_lines(data):
                builder.feed("status", turn, line + "\n")
            builder.end()
    return builder


def ending_lines(data: dict[str, Any]) -> list[str]:
    """The transcript's lines for a turn's end, from its turn.ended event's data: what a person
    should know of how it ran (`notice`), and why it did not complete."""
    lines = [str(data["notice"])] if data.get("notice") else []
    outcome = data.get("outcome")
    error = data.get("error")
    if outcome == m.TurnOutcome.INTERRUPTED:
        return [*lines, str(error or "interrupted: the daemon stopped while this turn was running")]
    if error:
        return [*lines, f"failed: {error}"]
    if data.get("stopReason") == "cancelled":
        return [*lines, f"cancelled {data.get('cancelledBy') or 'by the agent'}"]
    return lines


RECAP_CHARS = 200
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s")


def recap_of(text: str, limit: int = RECAP_CHARS) -> str:
    """A reply's recap: its last paragraph (what the agent concluded), cut at a sentence boundary."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    if not paragraphs:
        return ""
    last = " ".join(paragraphs[-1].split())
    if len(last) <= limit:
        return last
    cut = 0
    for match in _SENTENCE_END.finditer(last):
        if match.start() > limit:
            break
        cut = match.start()
    if cut:
        return last[:cut].rstrip()
    head = last[: limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


TRANSCRIPT_KINDS = (
    m.EventKind.TURN_QUEUED,
    m.EventKind.TURN_CHUNK,
    m.EventKind.TURN_THOUGHT,
    m.EventKind.TURN_TOOL,
    m.EventKind.PERMISSION_ANSWERED,  # (a refused one carries what it refused)
    m.EventKind.TURN_ENDED,
)


@dataclass
class ToolCall:
    id: str
    title: str = ""
    kind: str | None = None
    status: str | None = None
    locations: list[str] = field(default_factory=list)
    diffs: list[tuple[str, str | None, str]] = field(default_factory=list)  # path, old, new

    def shown_title(self, root: str) -> str:
        return shown_title(self.title, self.kind, root)


def shown_title(title: str, kind: str | None, root: str) -> str:
    """A tool call's title as a person reads it, in a transcript or a permission request: a path
    under the session's root relative to it ("Edit /home/me/app/notes.txt" reads "Edit notes.txt"),
    as most agents name them; a command's title as it is (it may run somewhere else:
    `cd /tmp && cat /home/me/app/a`)."""
    prefix = root.rstrip("/") + "/"
    if kind == "execute" or prefix == "/":
        return title
    return title.replace(prefix, "")


@dataclass
class Insight:
    """One session's plan, context, usage and attention inputs."""

    plan: list[dict[str, Any]] = field(default_factory=list)
    plan_updated: float | None = None
    in_progress_since: dict[str, float] = field(default_factory=dict)
    context: dict[str, Any] | None = None
    context_reported: bool = False
    # The agent's own running total of the session's cost as it last said it, and what its earlier
    # totals came to: ACP's `cost` is the session's (opencode's goes on across processes and
    # loads), but claude-agent-acp counts from 0 again in each process and in each session resumed
    # (after an eviction, a restart). A total lower than the last one is such a new count, and so is
    # the first one after the session was opened again at the agent that is not higher (a turn that
    # asked the model costs something): added to what came before, the session's cost is the sum.
    cost_counted: float | None = None
    cost_banked: float = 0.0
    cost_reopened: bool = False
    # An agent whose `cost` is the session's own total, kept across its processes and loads
    # (opencode: it dips a little after a load, which is no new count), is taken as it says, less
    # what a fork of another session copied of it (`cost_copied`: that session's cost at the fork).
    cost_whole: bool = False
    cost_copied: float = 0.0
    window: int = DEFAULT_WINDOW
    transcript_chars: int = 0
    usage: dict[str, float] = field(default_factory=dict)
    turns: int = 0
    busy_seconds: float = 0.0
    turn_started: float | None = None
    last_activity: float | None = None
    prompted_at: float | None = None  # when the turn under way was sent to the agent
    tools: dict[str, ToolCall] = field(default_factory=dict)
    turn_tools: set[str] = field(default_factory=set)  # the tool calls of the turn under way
    changes: m.Changes | None = None
    transcript: TranscriptBuilder = field(default_factory=TranscriptBuilder)
    transcript_loaded: bool = False

    # ------------------------------------------------------------ feeding

    def touch(self, now: float | None = None) -> None:
        self.last_activity = now if now is not None else time.time()

    def set_plan(self, entries: list[dict[str, Any]], now: float) -> None:
        self.plan = [
            {
                "content": str(e.get("content", "")),
                "priority": e.get("priority", "medium"),
                "status": e.get("status", "pending"),
            }
            for e in entries
        ]
        self.plan_updated = now
        running = {e["content"] for e in self.plan if e["status"] == "in_progress"}
        self.in_progress_since = {c: self.in_progress_since.get(c, now) for c in running}

    def set_context(self, payload: dict[str, Any]) -> None:
        # A field the update leaves out (claude-agent-acp sometimes sends `used: null`) keeps
        # its last reported value: the fill stays reported, the cost still counts.
        update = {k: payload[k] for k in ("used", "size", "cost") if payload.get(k) is not None}
        cost = update.get("cost")
        if isinstance(cost, dict) and type(cost.get("amount")) in (int, float) and self.cost_whole:
            update["cost"] = {**cost, "amount": max(0.0, float(cost["amount"]) - self.cost_copied)}
        elif isinstance(cost, dict) and type(cost.get("amount")) in (int, float):
            amount = float(cost["amount"])
            counted = self.cost_counted
            if counted is not None and (amount < counted or (self.cost_reopened and amount == counted)):
                self.cost_banked += counted
            self.cost_counted, self.cost_reopened = amount, False
            if self.cost_banked:
                update["cost"] = {**cost, "amount": self.cost_banked + amount}
        self.context = {**(self.context or {}), **update} if self.context_reported else update
        self.context_reported = True
        if isinstance(payload.get("size"), int) and payload["size"] > 0:
            self.window = payload["size"]

    def assume_window(self, size: int) -> None:
        """The window an estimated fill counts against, where the agent never says its own."""
        if not self.context_reported:
            self.window = size

    def cost_is_whole(self, copied: float = 0.0) -> None:
        """The agent's cost is the session's own total (see `cost_whole`); `copied`: what a fork
        carried over of the session it forked."""
        self.cost_whole, self.cost_copied = True, copied

    def reopened_at_agent(self) -> None:
        """The session was opened at the agent again (resumed, loaded, or new in a new process):
        its next cost may be a new count (see `cost_counted`)."""
        self.cost_reopened = True

    def restore_usage(self, context: dict[str, Any] | None, usage: dict[str, Any] | None) -> None:
        """Back from a stored session.usage event, after a restart."""
        if context:
            self.context = {k: context[k] for k in ("used", "size", "cost") if k in context}
            # The total so far, as if the agent had said it: a new count after the restart is lower.
            self.cost_counted, self.cost_banked = self.cost() or None, 0.0
            self.context_reported = not context.get("estimated", False)
            if not self.context_reported:
                self.transcript_chars = int(context.get("used", 0)) * CHARS_PER_TOKEN
            if isinstance(context.get("size"), int) and context["size"] > 0:
                self.window = context["size"]
        if usage:
            self.turns = int(usage.get("turns", 0))
            self.busy_seconds = float(usage.get("busySeconds", 0.0))
            for key in ("inputTokens", "outputTokens", "totalTokens"):
                self.usage[key] = int(usage.get(key, 0))

    def add_text(self, text: str) -> None:
        self.transcript_chars += len(text)

    def tool_update(self, payload: dict[str, Any]) -> ToolCall:
        tool_id = str(payload.get("toolCallId", ""))
        call = self.tools.setdefault(tool_id, ToolCall(tool_id))
        self.turn_tools.add(tool_id)
        if payload.get("title"):
            call.title = str(payload["title"])
        if payload.get("kind"):
            call.kind = str(payload["kind"])
        if payload.get("status") and call.status != "refused":  # (then failed, as the agent says)
            call.status = str(payload["status"])
        for location in payload.get("locations") or []:
            path = location.get("path") if isinstance(location, dict) else None
            if path and path not in call.locations:
                call.locations.append(path)
        for content in payload.get("content") or []:
            if isinstance(content, dict) and content.get("type") == "diff" and content.get("path"):
                call.diffs.append((content["path"], content.get("oldText"), content.get("newText", "")))
        return call

    def refuse(self, tool_call: dict[str, Any]) -> ToolCall:
        """The permission this call asked was refused, by a person or a rule (its title as the
        transcript shows it)."""
        call_id = str(tool_call.get("toolCallId", ""))
        call = self.tools.setdefault(call_id, ToolCall(call_id))
        call.title = str(tool_call.get("title") or call.title)
        call.kind = str(tool_call["kind"]) if tool_call.get("kind") else call.kind
        call.status = "refused"
        return call

    def turn_began(self, now: float) -> None:
        self.turn_started = now
        self.prompted_at = None
        self.turn_tools.clear()
        self.touch(now)

    def prompted(self, now: float | None = None) -> None:
        """The turn's prompt went to the agent: its silence counts from here (starting its process
        and opening the session there is not silence; 20 claude sessions at once took 20 s)."""
        self.touch(now)
        self.prompted_at = self.last_activity

    def turn_ended(self, now: float, usage: dict[str, int] | None) -> None:
        if self.turn_started is not None:
            self.busy_seconds += max(now - self.turn_started, 0.0)
        self.turn_started = None
        self.turns += 1
        for key in ("inputTokens", "outputTokens", "totalTokens"):
            if usage and isinstance(usage.get(key), int):
                self.usage[key] = self.usage.get(key, 0) + usage[key]
        self.touch(now)

    # ------------------------------------------------------------ reading

    def plan_view(self) -> m.Plan | None:
        if self.plan_updated is None:
            return None
        done = sum(1 for e in self.plan if e["status"] == "completed")
        current = next((e["content"] for e in self.plan if e["status"] == "in_progress"), None)
        return m.Plan(
            entries=[m.PlanEntry.model_validate(e) for e in self.plan],
            done=done,
            total=len(self.plan),
            current=current,
            updated_at=self.plan_updated,
        )

    def _fill(self) -> tuple[int, int, bool] | None:
        """Tokens used, the window's size, and whether that is estimated; None: nothing known yet."""
        if self.context_reported and self.context and "used" in self.context and "size" in self.context:
            return int(self.context["used"]), int(self.context["size"]), False
        if self.transcript_chars == 0:
            return None
        return self.transcript_chars // CHARS_PER_TOKEN, self.window, True

    def context_view(self) -> m.ContextFill | None:
        fill = self._fill()
        if fill is None:
            return None
        used, size, estimated = fill
        if estimated:
            return m.ContextFill(used=used, size=size, percent=round(100 * used / size, 1), estimated=True)
        assert self.context is not None
        return m.ContextFill(
            used=used,
            size=size,
            cost=m.Cost.model_validate(self.context["cost"]) if self.context.get("cost") else None,
            percent=round(100 * used / size, 1) if size else None,
        )

    def context_wire(self) -> dict[str, Any] | None:
        """`context_view()` as it goes on the wire, made without the models where its values are the
        plain types they hold (each session.usage event carries it; a test holds the two together)."""
        fill = self._fill()
        if fill is None:
            return None
        used, size, estimated = fill
        cost = None if estimated or self.context is None else self.context.get("cost")
        plain_cost = cost is None or (
            isinstance(cost, dict)
            and type(cost.get("amount")) in (int, float)
            and type(cost.get("currency")) is str
        )
        if type(size) is not int or not plain_cost:
            view = self.context_view()
            return view.wire() if view is not None else None
        if estimated:
            return {"used": used, "size": size, "percent": round(100 * used / size, 1), "estimated": True}
        wire: dict[str, Any] = {"used": used, "size": size}
        if cost:
            wire["cost"] = {"amount": float(cost["amount"]), "currency": cost["currency"]}
        if size:
            wire["percent"] = round(100 * used / size, 1)
        wire["estimated"] = False
        return wire

    def usage_wire(self) -> dict[str, Any] | None:
        """`usage_view()` as it goes on the wire, made without the model."""
        if self.turns == 0:
            return None
        return {
            "turns": int(self.turns),
            "inputTokens": int(self.usage.get("inputTokens", 0)),
            "outputTokens": int(self.usage.get("outputTokens", 0)),
            "totalTokens": int(self.usage.get("totalTokens", 0)),
            "busySeconds": float(round(self.busy_seconds, 3)),
        }

    def usage_view(self) -> m.SessionUsage | None:
        if self.turns == 0:
            return None
        return m.SessionUsage(
            turns=self.turns,
            input_tokens=int(self.usage.get("inputTokens", 0)),
            output_tokens=int(self.usage.get("outputTokens", 0)),
            total_tokens=int(self.usage.get("totalTokens", 0)),
            busy_seconds=round(self.busy_seconds, 3),
        )

    def cost(self) -> float:
        cost = (self.context or {}).get("cost")
        if isinstance(cost, dict) and isinstance(cost.get("amount"), int | float):
            return float(cost["amount"])
        return 0.0

    def attention(
        self, *, now: float, needs_you: bool, plan_stall: float, turn_timeout: float, silence: float
    ) -> list[m.Attention]:
        flags: list[m.Attention] = []
        if needs_you:
            flags.append(m.Attention.NEEDS_YOU)
        if any(now - since > plan_stall for since in self.in_progress_since.values()):
            flags.append(m.Attention.PLAN_STALLED)
        # The fill without its model: this runs on every update and status change.
        fill = self._fill()
        if fill is not None and fill[1] and fill[0] / fill[1] > CONTEXT_HIGH:
            flags.append(m.Attention.CONTEXT_HIGH)
        if self.turn_started is not None and now - self.turn_started > turn_timeout / 2:
            flags.append(m.Attention.TURN_LONG)
        if self.silent_for(now, needs_you=needs_you) > silence:
            flags.append(m.Attention.AGENT_SILENT)
        return flags

    def silent_for(self, now: float, *, needs_you: bool) -> float:
        """Seconds the agent has said nothing in the turn under way (0 when none is, when a person
        was asked, or while a tool of it runs: a long command is work, not silence)."""
        if self.turn_started is None or self.prompted_at is None or needs_you or self.last_activity is None:
            return 0.0
        if any(self.tools[t].status in ("pending", "in_progress") for t in self.turn_tools):
            return 0.0
        return max(now - self.last_activity, 0.0)
