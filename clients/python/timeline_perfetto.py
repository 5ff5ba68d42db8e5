"""The timeline as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

One process per agent and placement, one thread (track) per session. Each turn
is a slice from queued to ended (named by its outcome) holding a ``queued``
slice (to its start) and a ``running`` slice (start to end); slot waits sit in
``queued`` (agent slot) or ``running`` (live-session slot), tool calls and
permission waits in ``running``. Slices are begin/end pairs, properly nested
(a child that outlasts its parent is cut at the parent's end), in time order
per track. Reply chunks are instant events when asked for.
Timestamps are microseconds from the timeline's left edge (``otherData.t0``
is that edge as epoch seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessiond.client.timeline import WAIT_NAMES, Timeline, TurnSpan

WAIT_SLICE = {
    "agent": "wait: agent slot",
    "live": "wait: live-session slot",
    "opening": "wait: opening at the agent",
    "person": "wait: permission",
}


@dataclass
class _Slice:
    name: str
    cat: str
    start: float
    end: float
    args: dict[str, Any] = field(default_factory=dict)
    children: list[_Slice] = field(default_factory=list)


def _nest(parent: _Slice, slices: list[_Slice]) -> None:
    """Put `slices` under `parent` as a proper tree: each inside the newest open one that holds its start,
    cut to end with it."""
    stack = [parent]
    for s in sorted(slices, key=lambda s: (s.start, -s.end)):
        s.start = min(max(s.start, parent.start), parent.end)
        while len(stack) > 1 and s.start >= stack[-1].end:
            stack.pop()
        top = stack[-1]
        s.end = max(min(s.end, top.end), s.start)
        top.children.append(s)
        stack.append(s)


def _turn_slice(turn: TurnSpan, end_of_trace: float) -> _Slice:
    end = turn.ended if turn.ended is not None else end_of_trace
    outer = _Slice(
        f"turn {turn.outcome}",
        "turn",
        turn.queued,
        max(end, turn.queued),
        {
            "turn": turn.id,
            "outcome": turn.outcome,
            "prompt": turn.prompt,
            **({"detail": turn.detail} if turn.detail else {}),
            **({"plan": f"{turn.plan_done}/{turn.plan_total}"} if turn.plan_total is not None else {}),
            **(
                {"files": turn.files, "added": turn.added, "removed": turn.removed}
                if turn.files is not None
                else {}
            ),
        },
    )
    start = turn.started if turn.started is not None else outer.end
    queued = _Slice("queued", "queued", outer.start, max(start, outer.start))
    inner: list[_Slice] = [queued]
    running: _Slice | None = None
    if turn.started is not None:
        running = _Slice("running", "running", start, outer.end)
        inner.append(running)
    _nest(outer, inner)
    before: list[_Slice] = []
    during: list[_Slice] = []
    for wait in turn.waits:
        s = _Slice(
            WAIT_SLICE[wait.kind],
            "wait",
            wait.start,
            wait.end if wait.end is not None else outer.end,
            {"kind": wait.kind, "what": wait.what or WAIT_NAMES[wait.kind]},
        )
        (during if running is not None and wait.start >= running.start else before).append(s)
    for tool in turn.tools:
        during.append(
            _Slice(
                tool.title,
                "tool",
                tool.start,
                tool.end if tool.end is not None else outer.end,
                {"toolCallId": tool.id, "kind": tool.kind, "status": tool.status},
            )
        )
    _nest(queued, before)
    if running is not None:
        _nest(running, during)
    return outer


def _emit(s: _Slice, pid: int, tid: int, t0: float, out: list[dict[str, Any]]) -> None:
    ts = round((s.start - t0) * 1e6, 1)
    out.append({"name": s.name, "cat": s.cat, "ph": "B", "ts": ts, "pid": pid, "tid": tid, "args": s.args})
    for child in s.children:
        _emit(child, pid, tid, t0, out)
    end = max(round((s.end - t0) * 1e6, 1), ts)
    out.append({"name": s.name, "cat": s.cat, "ph": "E", "ts": end, "pid": pid, "tid": tid})


def trace_events(timeline: Timeline, *, chunks: bool = False) -> dict[str, Any]:
    """The Chrome trace-event JSON object (``{"traceEvents": [...], ...}``)."""
    t0 = timeline.start
    events: list[dict[str, Any]] = []
    for pid, ((agent, placement), rows) in enumerate(timeline.groups(), start=1):
        events.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"name": f"{agent} · {placement}"},
            }
        )
        events.append(
            {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
        )
        for tid, row in enumerate(rows, start=1):
            label = f"{row.id} {row.title}".strip()
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
            events.append(
                {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
            )
            track: list[dict[str, Any]] = []
            # Turns of one session run one after another; a turn queued behind another overlaps it
            # while it waits, so each turn's queued part starts no earlier than the one before ends.
            previous_end = float("-inf")
            for turn in row.turns:
                s = _turn_slice(turn, timeline.end)
                if s.start < previous_end:
                    _clip_start(s, previous_end)
                previous_end = max(previous_end, s.end)
                _emit(s, pid, tid, t0, track)
                if chunks:
                    for at in turn.chunks:
                        track.append(
                            {
                                "name": "chunk",
                                "cat": "chunk",
                                "ph": "i",
                                "s": "t",
                                "pid": pid,
                                "tid": tid,
                                "ts": round((at - t0) * 1e6, 1),
                            }
                        )
            track.sort(key=lambda e: e["ts"])  # stable: B/E order at equal times is kept
            events += track
    run = timeline.run
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "title": timeline.title,
            "t0": t0,
            "serialSeconds": round(timeline.serial_seconds, 6),
            "spanSeconds": round(timeline.span_seconds, 6),
            **(
                {"run": run.id, "runWallSeconds": run.wall_seconds, "runSerialSeconds": run.serial_seconds}
                if run is not None
                else {}
            ),
        },
    }


def _clip_start(s: _Slice, at: float) -> None:
    """Start `s` (and its children) no earlier than `at`."""
    s.start = max(s.start, at)
    s.end = max(s.end, s.start)
    for child in s.children:
        _clip_start(child, s.start)
