"""The pure parts of session insight: transcript lines, context, attention, throttling."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiond.daemon.changes import count_lines
from sessiond.daemon.insight import Insight, ToolCall, TranscriptBuilder, ending_lines, recap_of, replay
from sessiond.daemon.records import Turn
from sessiond.daemon.throttle import Throttle
from sessiond.protocol.models import Attention


def test_pieces_become_numbered_lines_per_role_and_turn() -> None:
    builder = TranscriptBuilder()
    builder.feed("user", "t1", "fix it\n")
    builder.feed("agent", "t1", "on ")
    builder.feed("agent", "t1", "it\nnow")
    builder.feed("thought", "t1", "hmm")  # another role ends the agent's open line
    builder.end()
    assert [(ln.n, ln.role, ln.text) for ln in builder.lines] == [
        (0, "user", "fix it"),
        (1, "agent", "on it"),
        (2, "agent", "now"),
        (3, "thought", "hmm"),
    ]
    assert builder.total == 4


def test_only_the_last_lines_are_kept_but_numbering_goes_on() -> None:
    builder = TranscriptBuilder(keep=3)
    for n in range(10):
        builder.feed("agent", "t", f"line {n}\n")
    assert [ln.n for ln in builder.tail(5)] == [7, 8, 9]
    assert builder.total == 10


def test_stored_events_give_the_same_transcript() -> None:
    events = [
        ("turn.queued", "t1", {"prompt": "hello"}),
        ("turn.chunk", "t1", {"text": "hi "}),
        ("turn.chunk", "t1", {"text": "there"}),
        ("turn.tool", "t1", {"toolCallId": "c1", "title": "Run ls", "toolKind": "execute", "first": True}),
        ("turn.tool", "t1", {"toolCallId": "c1", "title": "Run ls", "toolKind": "execute", "first": False}),
        ("turn.ended", "t1", {}),
    ]
    builder = replay(TranscriptBuilder(), events)
    assert [(ln.role, ln.text) for ln in builder.lines] == [
        ("user", "hello"),
        ("agent", "hi there"),
        ("tool", "[execute] Run ls"),
    ]


def tool(call: str, title: str, first: bool = False) -> tuple[str, str, dict[str, object]]:
    return ("turn.tool", "t1", {"toolCallId": call, "title": title, "toolKind": "execute", "first": first})


def test_a_tool_calls_line_takes_its_later_title_until_something_else_comes() -> None:
    """claude-agent-acp names a call "Terminal" first and "pwd" once its input has streamed."""
    builder = replay(TranscriptBuilder(), [tool("c1", "Terminal", first=True), tool("c1", "pwd")])
    assert [(ln.n, ln.role, ln.text) for ln in builder.tail(5)] == [(0, "tool", "[execute] pwd")]
    assert builder.total == 0  # still open: shown, numbered when it closes
    events = [
        tool("c1", "Terminal", first=True),
        tool("c1", "pwd > where.txt"),
        tool("c2", "Terminal", first=True),  # another call: the first one's line is done
        tool("c1", "pwd (done)"),  # too late: the line is written
        tool("c2", "ls"),
        ("turn.chunk", "t1", {"text": "Ran them.\n"}),
        tool("c2", "ls (done)"),  # too late: something else came after it
        ("turn.ended", "t1", {}),
    ]
    builder = replay(TranscriptBuilder(), events)
    assert [(ln.role, ln.text) for ln in builder.lines] == [
        ("tool", "[execute] pwd > where.txt"),
        ("tool", "[execute] ls"),
        ("agent", "Ran them."),
    ]
    # An update of a call whose line was never started (it had no title then) starts none.
    assert replay(TranscriptBuilder(), [tool("c3", "late")]).tail(5) == []


def test_an_agents_messages_are_paragraphs_of_the_reply_and_lines_of_the_transcript() -> None:
    """Agents send their messages' text with nothing between them ("Writing the notes." then,
    after the write, "All done."): a message after a tool call or a thought starts a paragraph."""
    loop = asyncio.new_event_loop()
    turn = Turn(id="t1", session="s1", prompt="go", queued_at=0.0, future=loop.create_future())
    loop.close()
    assert turn.said("Writing the notes.") == "Writing the notes."
    turn.between_messages = True  # the write
    assert turn.said("All done") == "\n\nAll done"
    assert turn.said(", both.") == ", both."  # the same message goes on
    turn.between_messages = True
    assert turn.said("\nEnds here\n") == "\n\nEnds here\n"  # its own line breaks give way to one break
    turn.between_messages = True
    assert turn.said("Last.") == "\nLast."  # after a line break, one more makes the paragraph
    assert turn.text == "Writing the notes.\n\nAll done, both.\n\nEnds here\n\nLast."
    assert recap_of(turn.text) == "Last."

    events = [
        ("turn.chunk", "t1", {"text": "Writing the notes."}),
        (
            "turn.tool",
            "t1",
            {"toolCallId": "c1", "title": "Write notes.txt", "toolKind": "edit", "first": True},
        ),
        ("turn.chunk", "t1", {"text": "\n\nAll done"}),
        ("turn.chunk", "t1", {"text": ", both.\n\nSee above."}),
        ("turn.ended", "t1", {}),
    ]
    assert [(ln.role, ln.text) for ln in replay(TranscriptBuilder(), events).lines] == [
        ("agent", "Writing the notes."),
        ("tool", "[edit] Write notes.txt"),
        ("agent", "All done, both."),  # no empty line after the tool's: the break opened it
        ("agent", ""),  # within a message, its own blank lines stay
        ("agent", "See above."),
    ]


def test_context_is_estimated_when_the_agent_reports_none() -> None:
    insight = Insight()
    assert insight.context_view() is None
    insight.add_text("x" * 4000)
    estimated = insight.context_view()
    assert estimated is not None
    assert estimated.estimated
    assert estimated.used == 1000
    insight.set_context({"used": 5000, "size": 100000, "cost": {"amount": 0.5, "currency": "USD"}})
    reported = insight.context_view()
    assert reported is not None
    assert not reported.estimated
    assert reported.percent == 5.0
    assert insight.cost() == 0.5


def test_a_cost_counted_again_from_zero_adds_to_the_one_before() -> None:
    """claude-agent-acp counts a session's cost from 0 again in a new process: the session's cost
    is what it counted before, then the new count on top."""

    def said(amount: float) -> float:
        insight.set_context({"used": 10, "size": 100, "cost": {"amount": amount, "currency": "USD"}})
        return insight.cost()

    insight = Insight()
    assert [said(0.25), said(0.5)] == [0.25, 0.5]  # one count, growing
    assert [said(0.125), said(0.375)] == [0.625, 0.875]  # a new one, on top of 0.5
    assert said(0.375) == 0.875  # the same total said again
    insight.reopened_at_agent()  # resumed after an eviction: a new count, its first turn as dear
    assert [said(0.375), said(0.375)] == [1.25, 1.25]
    # After a restart of the daemon: the total stored, then the agent's new count on top of it.
    restored = Insight()
    restored.restore_usage({"used": 10, "size": 100, "cost": {"amount": 0.875, "currency": "USD"}}, None)
    restored.set_context({"used": 10, "size": 100, "cost": {"amount": 0.125, "currency": "USD"}})
    assert restored.cost() == 1.0
    # An agent whose count goes on where it was (as ACP says a session's cost is) is taken as it says.
    going_on = Insight()
    going_on.restore_usage({"used": 10, "size": 100, "cost": {"amount": 0.875, "currency": "USD"}}, None)
    going_on.set_context({"used": 10, "size": 100, "cost": {"amount": 1.0, "currency": "USD"}})
    assert going_on.cost() == 1.0


def test_an_agent_whose_cost_is_the_session_s_total_is_taken_as_it_says_less_what_a_fork_copied() -> None:
    """opencode's cost is the session's own total across its processes and loads: after a load it
    dipped a little (2.26656, then 2.25927), which read as a new count and doubled the session's
    cost. A fork's totals include its main session's cost at the fork, which is not the fork's."""

    def said(insight: Insight, amount: float) -> float:
        insight.set_context({"used": 10, "size": 100, "cost": {"amount": amount, "currency": "USD"}})
        return insight.cost()

    whole = Insight()
    whole.cost_is_whole()
    assert [said(whole, 2.26656), said(whole, 2.25927), said(whole, 2.5)] == [2.26656, 2.25927, 2.5]
    whole.reopened_at_agent()
    assert said(whole, 2.5) == 2.5  # the same total again after a reopen: nothing new
    fork = Insight()
    fork.cost_is_whole(copied=1.5004)
    assert round(said(fork, 1.5012), 6) == 0.0008
    assert said(fork, 1.0) == 0.0  # (never below nothing)


def test_attention_flags() -> None:
    insight = Insight()
    insight.set_plan([{"content": "slow step", "status": "in_progress"}], now=1000.0)
    insight.set_context({"used": 90, "size": 100})
    insight.turn_began(1000.0)
    flags = insight.attention(now=1700.0, needs_you=True, plan_stall=600.0, turn_timeout=1200.0, silence=20.0)
    assert flags == [Attention.NEEDS_YOU, Attention.PLAN_STALLED, Attention.CONTEXT_HIGH, Attention.TURN_LONG]
    assert insight.attention(
        now=1001.0, needs_you=False, plan_stall=600.0, turn_timeout=1200.0, silence=20.0
    ) == [Attention.CONTEXT_HIGH]


def test_an_agent_is_silent_only_with_a_turn_under_way_and_nothing_else_to_wait_on() -> None:
    def flagged(ins: Insight, now: float, *, needs_you: bool = False) -> bool:
        flags = ins.attention(
            now=now, needs_you=needs_you, plan_stall=600.0, turn_timeout=1200.0, silence=20.0
        )
        return Attention.AGENT_SILENT in flags

    insight = Insight()
    insight.touch(1000.0)
    assert not flagged(insight, 1100.0)  # no turn under way: idle, not silent
    insight.turn_began(990.0)
    assert not flagged(insight, 1030.0)  # its process starting, its session opening: not silence
    insight.prompted(1000.0)
    assert not flagged(insight, 1019.0)
    assert flagged(insight, 1021.0)
    assert not flagged(insight, 1021.0, needs_you=True)  # a person was asked: the wait is theirs
    insight.touch(1021.0)  # the agent speaks again
    assert not flagged(insight, 1030.0)
    insight.tool_update({"toolCallId": "t1", "title": "make", "status": "in_progress"})
    assert not flagged(insight, 1100.0)  # its command runs: work, not silence
    insight.tool_update({"toolCallId": "t1", "status": "completed"})
    assert flagged(insight, 1100.0)
    # A tool left running by an earlier turn (cancelled mid-call) does not hide a later silence.
    insight.tool_update({"toolCallId": "t2", "status": "in_progress"})
    insight.turn_ended(1100.0, None)
    insight.turn_began(1200.0)
    insight.prompted(1200.0)
    assert flagged(insight, 1221.0)


def test_a_plan_entry_keeps_its_start_while_it_stays_in_progress() -> None:
    insight = Insight()
    insight.set_plan([{"content": "a", "status": "in_progress"}], now=10.0)
    insight.set_plan([{"content": "a", "status": "in_progress"}, {"content": "b"}], now=20.0)
    assert insight.in_progress_since == {"a": 10.0}


def test_line_counts() -> None:
    assert count_lines(None, "a\nb\n") == (2, 0)
    assert count_lines("a\nb\nc", "a\nB\nc") == (1, 1)


async def test_the_throttle_runs_at_once_then_once_at_the_end_of_the_window() -> None:
    now = [0.0]
    throttle = Throttle(1.0, clock=lambda: now[0])
    runs: list[float] = []
    done = asyncio.Event()

    def run() -> None:
        runs.append(now[0])
        if len(runs) == 2:
            done.set()

    throttle.request("k", run)
    now[0] = 0.2
    throttle.request("k", run)
    throttle.request("k", run)  # folded into the one already due
    assert runs == [0.0]
    await asyncio.wait_for(done.wait(), 10)
    assert len(runs) == 2


async def test_flush_runs_what_waits() -> None:
    throttle = Throttle(60.0)
    runs: list[str] = []
    throttle.request("k", lambda: runs.append("first"))
    throttle.request("k", lambda: runs.append("second"))
    throttle.flush()
    assert runs == ["first", "second"]


def test_a_usage_update_without_used_keeps_the_last_reported_fill_and_counts_the_cost() -> None:
    ins = Insight()
    ins.set_context({"used": 50_000, "size": 200_000})
    ins.set_context({"used": None, "size": 200_000, "cost": {"amount": 0.5, "currency": "USD"}})
    view = ins.context_view()
    assert view is not None
    assert (view.used, view.size, view.estimated) == (50_000, 200_000, False)
    assert ins.cost() == 0.5


def test_the_recap_is_the_last_paragraph_cut_at_a_sentence() -> None:
    assert recap_of("Looked around.\n\nFixed the bug.\nAll tests pass.\n") == "Fixed the bug. All tests pass."
    long = "Done. " + "x" * 300
    assert recap_of(long) == "Done."
    assert len(recap_of("word " * 100)) <= 200


def test_a_turn_that_did_not_complete_ends_its_transcript_with_a_line() -> None:
    assert ending_lines({"stopReason": "end_turn", "outcome": "completed"}) == []
    assert ending_lines({"stopReason": "cancelled", "cancelledBy": "by a client"}) == [
        "cancelled by a client"
    ]
    assert ending_lines({"error": "boom", "outcome": "failed"}) == ["failed: boom"]
    assert ending_lines({"error": "interrupted: the daemon stopped", "outcome": "interrupted"}) == [
        "interrupted: the daemon stopped"
    ]
    ended = replay(TranscriptBuilder(), [("turn.ended", "t1", {"error": "boom"})])
    assert [(ln.role, ln.text) for ln in ended.lines] == [("status", "failed: boom")]


def test_controls_made_once_per_offer_are_what_the_model_gives_and_a_fresh_copy_each_time() -> None:
    from sessiond.daemon.controls import Choices, Offer, controls_info, controls_wire

    offer = Offer(
        modes=[{"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan", "description": "p"}],
        mode="default",
        options=[{"id": "model", "name": "Model", "type": "select", "currentValue": "a", "options": []}],
        commands=[{"name": "compact", "description": "c", "input": {"hint": "h"}}],
    )
    for source, shown, choices in [
        ("session", offer, Choices()),
        ("agent", offer, Choices(mode="plan", config={"model": "b"})),
        ("none", None, Choices(mode="plan")),
    ]:
        first = controls_wire(shown, source, choices)  # type: ignore[arg-type]
        assert first == controls_info(shown, source, choices).wire()  # type: ignore[arg-type]
        first["modes"] = "changed by whoever got it"
        again = controls_wire(shown, source, choices)  # type: ignore[arg-type]
        assert again == controls_info(shown, source, choices).wire()  # type: ignore[arg-type]
    offer.mode = "plan"  # what it was made from changed: made again
    assert controls_wire(offer, "session", Choices())["mode"] == "plan"


_numbers = st.integers(min_value=0, max_value=10**7) | st.floats(min_value=0, max_value=1e7, allow_nan=False)
_costs = (
    st.none()
    | st.fixed_dictionaries(
        {
            "amount": _numbers | st.booleans() | st.text(max_size=3),
            "currency": st.sampled_from(["USD", "EUR"]),
        },
        optional={"extra": st.integers()},
    )
    | st.just({})
)


@settings(max_examples=400)
@given(
    reported=st.booleans(),
    used=_numbers,
    size=st.integers(min_value=1, max_value=10**7) | st.just(0) | st.floats(min_value=1, max_value=1e7),
    cost=_costs,
    window=st.integers(min_value=1, max_value=10**7) | st.floats(min_value=1, max_value=1e7),
    chars=st.integers(min_value=0, max_value=10**8),
    turns=st.integers(min_value=0, max_value=50),
    tokens=st.dictionaries(
        st.sampled_from(["inputTokens", "outputTokens", "totalTokens"]), st.integers(0, 10**9)
    ),
    busy=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_the_usage_events_wire_forms_are_what_the_models_give(
    reported: bool,
    used: Any,
    size: Any,
    cost: Any,
    window: Any,
    chars: int,
    turns: int,
    tokens: dict[str, int],
    busy: float,
) -> None:
    """session.usage's context and usage, made without the models, are what the models give:
    values, their types (1 and 1.0 differ on the wire), key order; or the same error."""
    context = {"used": used, "size": size, **({"cost": cost} if cost is not None else {})}
    ins = Insight(context=context, context_reported=reported, window=window, transcript_chars=chars)
    ins.turns, ins.usage, ins.busy_seconds = turns, dict(tokens), busy

    def by_model() -> Any:
        view = ins.context_view()
        return view.wire() if view is not None else None

    for fast, slow in ((ins.context_wire, by_model), (ins.usage_wire, lambda: _wire(ins.usage_view()))):
        try:
            expected = slow()
        except Exception as exc:
            with pytest.raises(type(exc)):
                fast()
            continue
        got = fast()
        assert json.dumps(got) == json.dumps(expected)  # (types and key order too)


def _wire(view: Any) -> Any:
    return view.wire() if view is not None else None


def test_a_tool_title_reads_paths_under_the_root_relative_to_it_but_a_command_as_it_is() -> None:
    edit = ToolCall("t1", title="Edit /home/me/app/src/notes.txt and /home/me/app2/x", kind="edit")
    assert edit.shown_title("/home/me/app") == "Edit src/notes.txt and /home/me/app2/x"
    assert edit.shown_title("/home/me/app/") == "Edit src/notes.txt and /home/me/app2/x"
    assert edit.shown_title("/") == edit.title  # (every path is under /: left whole)
    run = ToolCall("t2", title="cd /tmp && cat /home/me/app/a", kind="execute")
    assert run.shown_title("/home/me/app") == run.title
