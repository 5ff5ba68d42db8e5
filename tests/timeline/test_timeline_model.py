"""The timeline's pure parts: the model from events, the page's data, the Perfetto JSON."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from bench.timeline import synthetic_events
from sessiond.client import timeline, timeline_html, timeline_perfetto

ROOT = Path(__file__).resolve().parents[2]


def ev(
    seq: int, at: float, kind: str, session: str = "s1", turn: str | None = None, **data: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "seq": seq,
        "kind": kind,
        "time": at,
        "agent": "demo",
        "session": session,
        "data": data,
    }
    if turn:
        event["turn"] = turn
    return event


def test_waits_outcomes_and_an_interrupted_turn() -> None:
    events = [
        ev(1, 100.0, "session.opened", placement="worktree", title="fix it", sessionKind="main"),
        ev(2, 100.0, "turn.queued", turn="t1", prompt="plan A | B\nsay hi"),
        ev(
            3,
            100.1,
            "session.status",
            status="queued",
            detail="waiting for an agent slot: ... (maxActiveTurns)",
        ),
        ev(4, 102.0, "turn.started", turn="t1"),
        ev(5, 102.0, "session.status", status="queued", detail="waiting for a live-session slot: ..."),
        ev(6, 103.0, "session.status", status="working"),
        ev(7, 103.5, "turn.tool", turn="t1", toolCallId="c1", title="ask", status="pending", first=True),
        ev(8, 103.5, "permission.asked", turn="t1", permission="p1", toolCall={"title": "may I?"}),
        ev(9, 105.0, "permission.answered", turn="t1", permission="p1", optionId="allow_once"),
        ev(10, 105.1, "turn.tool", turn="t1", toolCallId="c1", status="completed"),
        ev(11, 105.2, "session.plan", plan={"done": 1, "total": 2}),
        ev(12, 106.0, "turn.ended", turn="t1", outcome="failed", error="boom"),
        ev(13, 106.1, "session.changes", changes={"files": [{"path": "a"}], "added": 3, "removed": 1}),
        ev(14, 107.0, "turn.queued", turn="t2", prompt="hang"),
        ev(15, 107.0, "turn.started", turn="t2"),
        ev(16, 108.0, "turn.chunk", turn="t2", text="x"),
        # The daemon was killed here; a week later it says so.
        ev(17, 700000.0, "turn.ended", turn="t2", outcome="interrupted", error="the daemon stopped"),
    ]
    picture = timeline.build(events)
    (row,) = picture.sessions
    assert (row.agent, row.placement, row.title) == ("demo", "worktree", "fix it")
    first, second = row.turns
    assert [(w.kind, w.start, w.end) for w in first.waits] == [
        ("agent", 100.1, 102.0),
        ("live", 102.0, 103.0),
        ("person", 103.5, 105.0),
    ]
    assert first.waits[2].what == "may I? → allow_once"
    assert (first.outcome, first.detail, first.plan_done, first.plan_total) == ("failed", "boom", 1, 2)
    assert (first.files, first.added, first.removed) == (1, 3, 1)
    assert [(t.title, t.start, t.end, t.status) for t in first.tools] == [("ask", 103.5, 105.1, "completed")]
    assert second.outcome == "interrupted"
    assert second.ended == 108.0, "drawn to its last event, not to the restart"
    assert picture.serial_seconds == 4.0, "an interrupted turn adds nothing, as in the daemon's count"
    assert picture.end == 108.0
    assert picture.counts()["failed"] == 1


def test_a_wait_for_the_agent_to_open_others_first() -> None:
    opening = "opening at agent 'claude', which is asked to open 4 sessions at a time (maxOpeningSessions)"
    events = [
        ev(1, 100.0, "session.opened", placement="here", title="t", sessionKind="main"),
        ev(2, 100.0, "turn.queued", turn="t1", prompt="go"),
        ev(3, 100.0, "turn.started", turn="t1"),
        ev(4, 100.0, "session.status", status="queued", detail=opening),
        ev(5, 101.5, "session.status", status="working"),
        ev(6, 102.0, "turn.ended", turn="t1", outcome="completed"),
    ]
    ((turn,),) = [row.turns for row in timeline.build(events).sessions]
    assert [(w.kind, w.start, w.end, w.what) for w in turn.waits] == [("opening", 100.0, 101.5, opening)]
    assert timeline.WAIT_NAMES["opening"].endswith("(maxOpeningSessions)")
    perfetto = json.dumps(timeline_perfetto.trace_events(timeline.build(events)))
    assert "wait: opening at the agent" in perfetto


def test_a_selection_that_starts_mid_turn_and_the_last_hour() -> None:
    events = [
        ev(1, 10.0, "session.opened", placement="here"),
        ev(2, 10.0, "session.opened", session="s2", placement="sandbox"),
        ev(3, 20.0, "turn.queued", session="s2", turn="old"),
        ev(4, 21.0, "turn.started", session="s2", turn="old"),
        ev(5, 22.0, "turn.ended", session="s2", turn="old", outcome="completed"),
        ev(6, 50.0, "turn.started", turn="t1"),
        ev(7, 60.0, "turn.ended", turn="t1", outcome="completed"),
    ]
    recent = timeline.build(events, since_time=30.0)
    assert [(r.id, r.placement) for r in recent.sessions] == [("s1", "here")]
    (turn,) = recent.turns
    assert (turn.queued, turn.started, turn.ended) == (50.0, 50.0, 60.0)
    assert recent.start == 50.0
    assert len(timeline.build(events).sessions) == 2


def test_the_page_carries_its_data_safely() -> None:
    events = [
        ev(1, 1.0, "turn.queued", turn="t1", prompt="say </script><script>alert(1)</script>"),
        ev(2, 2.0, "turn.started", turn="t1"),
        ev(3, 3.0, "turn.ended", turn="t1", outcome="completed"),
    ]
    page = timeline_html.render(timeline.build(events, title="<b>mine</b>"))
    assert "<title>&lt;b&gt;mine&lt;/b&gt;</title>" in page
    assert page.count("</script>") == 1, "the prompt cannot close the page's script"
    data = json.loads(re.search(r"const DATA = (\{.*?\});\n", page, re.S).group(1).replace("<\\/", "</"))  # type: ignore[union-attr]
    assert data["turns"][0][6] == "say </script><script>alert(1)</script>"
    assert data["header"]["serial"] == 1.0


def test_perfetto_slices_nest_and_close_at_scale() -> None:
    picture = timeline.build(synthetic_events(60, 3), chunks=True)
    trace = timeline_perfetto.trace_events(picture, chunks=True)
    stacks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    last: dict[tuple[int, int], float] = {}
    turns = 0
    for event in trace["traceEvents"]:
        key = (event["pid"], event["tid"])
        if event["ph"] == "M":
            continue
        assert event["ts"] >= last.get(key, float("-inf"))
        last[key] = event["ts"]
        if event["ph"] == "B":
            stacks.setdefault(key, []).append(event)
            turns += event["cat"] == "turn"
        elif event["ph"] == "E":
            assert stacks[key].pop()["name"] == event["name"]
    assert all(stack == [] for stack in stacks.values())
    assert turns == 180
    assert len(stacks) == 60


def test_the_page_ships_in_the_wheel() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert timeline_html.PAGE in project["tool"]["setuptools"]["package-data"]["sessiond.client"]
    assert (ROOT / "clients" / "python" / timeline_html.PAGE).exists()
