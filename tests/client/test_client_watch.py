"""``sessiond watch``: its model driven by events, and the real thing in a terminal (tmux)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.harness import Daemon
from sessiond.client import connect
from sessiond.client.watch import KEYS_HELP, NOTICE_SECONDS, WatchModel, handle_key
from sessiond.client.wording import cells as display_cells
from sessiond.protocol import models as m
from tests.terminal import Tmux, bottom, cells, row_of

pytestmark = pytest.mark.timeout(120)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def info(sid: str, status: m.SessionStatus = m.SessionStatus.IDLE, **fields: Any) -> m.SessionInfo:
    return m.SessionInfo(
        id=sid,
        agent="demo",
        root="/",
        placement="here",
        status=status,
        status_since=NOW,
        created_at=NOW,
        **fields,
    )


class Log:
    def __init__(self) -> None:
        self.seq = 100

    def __call__(self, kind: m.EventKind, session: str | None = None, **data: Any) -> m.Event:
        self.seq += 1
        return m.Event(seq=self.seq, kind=kind, time=NOW, agent="demo", session=session, data=data)


@pytest.fixture
def model() -> WatchModel:
    model = WatchModel()
    sessions = [
        info("s1"),
        info("s2", m.SessionStatus.WORKING, title="Fix the login page flow"),
        info("s3"),
        info("s4", m.SessionStatus.WORKING),
    ]
    model.load(m.Snapshot(head=100, sessions=sessions, fleet=m.Fleet(open=4, working=2)))
    return model


def test_the_rows_show_status_plan_context_files_and_the_last_line(model: WatchModel) -> None:
    event = Log()
    model.apply(event(m.EventKind.SESSION_PLAN, "s2", plan={"entries": [], "done": 2, "total": 3}))
    model.apply(event(m.EventKind.SESSION_USAGE, "s2", context={"used": 50, "size": 200, "percent": 25.0}))
    changes = {
        "files": [{"path": "a.py", "kind": "modified", "added": 3, "removed": 1}],
        "added": 3,
        "removed": 1,
    }
    model.apply(event(m.EventKind.SESSION_CHANGES, "s2", changes=changes))
    model.apply(event(m.EventKind.TURN_STARTED, "s2"))
    model.apply(event(m.EventKind.TURN_CHUNK, "s2", text="first line"))
    model.apply(event(m.EventKind.TURN_CHUNK, "s2", text="\nnow this"))
    row = model.row(model.sessions["s2"])
    title = ["Fix", "the", "login", "pag…"]  # at most 18 characters
    assert row.split() == ["s2", *title, "demo", "working", "2/3", "25%", "1", "+3", "-1", "now", "this"]
    model.apply(event(m.EventKind.SESSION_STATUS, "s2", status="needs_you", since=0))
    model.apply(event(m.EventKind.SESSION_ATTENTION, "s2", attention=["needs_you"]))
    assert model.row(model.sessions["s2"]).startswith(" !s2       Fix the login pag… demo       NEEDS YOU")
    model.apply(event(m.EventKind.SESSION_ATTENTION, "s1", attention=["context_high", "plan_stalled"]))
    assert model.footer() == f"s1 ! context_high, plan_stalled · {KEYS_HELP}"  # what its "!" stands for
    model.apply(event(m.EventKind.SESSION_ATTENTION, "s1", attention=[]))
    assert model.footer() == KEYS_HELP
    assert model.row(model.sessions["s1"]).split()[:4] == [">", "s1", "-", "demo"]  # selected; no title
    model.apply(event(m.EventKind.TURN_ENDED, "s2", stopReason="end_turn"))
    assert model.sessions["s2"].recap == "first line"
    model.apply(event(m.EventKind.FLEET, None, open=4, working=1, needsYou=1))
    assert model.header() == "sessiond watch  1 working · 1 needs you · 4 open"


def test_a_tool_call_retitled_by_its_update_and_a_question_until_answered(model: WatchModel) -> None:
    """claude-agent-acp names a Bash call "Terminal" first, by its command once its input has
    streamed; a question asked about it is the row's last line until it is answered."""
    event = Log()

    def tool(call: str, title: str, first: bool = False) -> str:
        model.apply(
            event(m.EventKind.TURN_TOOL, "s2", toolCallId=call, title=title, toolKind="execute", first=first)
        )
        return model.row(model.sessions["s2"])

    assert tool("c1", "Terminal", first=True).endswith("  [execute] Terminal")
    assert tool("c1", "pwd > where.txt").endswith("  [execute] pwd > where.txt")
    assert tool("c2", "another call").endswith("  [execute] pwd > where.txt")  # not the call shown
    options = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
    asked = {
        "permission": "p-1",
        "toolCall": {"title": "pwd > where.txt", "kind": "execute"},
        "options": options,
    }
    model.apply(event(m.EventKind.PERMISSION_ASKED, "s2", **asked))
    model.apply(event(m.EventKind.SESSION_STATUS, "s2", status="needs_you", since=0))
    assert model.row(model.sessions["s2"]).endswith("  asks: [execute] pwd > where.txt")
    model.selected = "s2"
    assert model.footer() == "s2 asks (a allow): [execute] pwd > where.txt"
    handle_key(model, ord("a"))
    assert model.answers == [("p-1", "ok")]
    assert model.footer() == "s2: Allow: [execute] pwd > where.txt"
    model.apply(event(m.EventKind.PERMISSION_ANSWERED, "s2", permission="p-1", optionId="ok"))
    model.apply(event(m.EventKind.SESSION_STATUS, "s2", status="working", since=0))
    assert model.row(model.sessions["s2"]).endswith("  [execute] pwd > where.txt")  # what it does now
    handle_key(model, ord("j"))  # any key clears the notice
    handle_key(model, ord("k"))
    assert model.footer() == KEYS_HELP
    model.apply(event(m.EventKind.TURN_CHUNK, "s2", text="ran it"))
    assert tool("c1", "pwd (done)").endswith("  ran it")  # not after it spoke


def test_a_failed_session_found_at_the_start_shows_why_its_last_turn_failed() -> None:
    model = WatchModel()
    failed = info(
        "s1", m.SessionStatus.FAILED, recap="the turn before's answer", last_error="the tests did not pass"
    )
    done = info("s2", recap="all green")
    model.load(m.Snapshot(head=100, sessions=[failed, done], fleet=m.Fleet(open=2, failed=1)))
    assert model.row(model.sessions["s1"]).endswith("  error: the tests did not pass")
    assert model.row(model.sessions["s2"]).endswith("  all green")
    model.add(info("s3", m.SessionStatus.FAILED, last_error="agent 'demo' exited"))  # (opened since)
    assert model.row(model.sessions["s3"]).endswith("  error: agent 'demo' exited")


def test_a_session_read_again_shows_what_it_says_now() -> None:
    """After a resync or a restarted daemon, a resting session's line is the snapshot's, not the
    one shown before (its turn may have ended while nobody watched)."""
    model = WatchModel()
    model.load(m.Snapshot(head=100, sessions=[info("s1", recap="before")], fleet=m.Fleet(open=1)))
    model.load(m.Snapshot(head=140, sessions=[info("s1", recap="after")], fleet=m.Fleet(open=1)))
    assert model.row(model.sessions["s1"]).endswith("  after")


def test_a_session_at_work_shows_this_turn_not_the_last_ones_recap() -> None:
    model = WatchModel()
    working = info("s1", m.SessionStatus.WORKING, recap="the last turn's answer", turns=1)
    model.load(m.Snapshot(head=100, sessions=[working], fleet=m.Fleet(open=1, working=1)))
    assert "answer" not in model.row(model.sessions["s1"])
    assert model.tails == {"s1"}  # read from its transcript instead
    said = [m.TranscriptLine(n=0, role="agent", text="the last turn's answer")]
    said.append(m.TranscriptLine(n=1, role="agent", text="looking at the tests"))
    model.tail("s1", m.Transcript(lines=said, total=2))
    assert model.row(model.sessions["s1"]).endswith("  looking at the tests")
    event = Log()
    model.apply(event(m.EventKind.TURN_CHUNK, "s1", text="\nall green"))
    model.apply(event(m.EventKind.TURN_ENDED, "s1", stopReason="end_turn"))
    model.apply(event(m.EventKind.SESSION_STATUS, "s1", status="idle", since=0))
    assert model.row(model.sessions["s1"]).endswith("  all green")
    model.apply(event(m.EventKind.TURN_STARTED, "s1"))
    model.apply(event(m.EventKind.SESSION_STATUS, "s1", status="working", since=0))
    plan = {
        "entries": [{"content": "Fix it", "status": "in_progress"}],
        "done": 0,
        "total": 1,
        "current": "Fix it",
    }
    model.apply(event(m.EventKind.SESSION_PLAN, "s1", plan=plan))
    assert model.row(model.sessions["s1"]).endswith("  (Fix it)")  # its step, until it says something


def test_a_session_at_work_shows_the_tool_call_it_makes_until_it_speaks(model: WatchModel) -> None:
    event = Log()
    model.apply(event(m.EventKind.TURN_STARTED, "s2"))
    model.apply(event(m.EventKind.TURN_CHUNK, "s2", text="I will fix the form"))
    call = {"toolCallId": "c1", "title": "Write login.py", "toolKind": "edit", "status": "pending"}
    model.apply(event(m.EventKind.TURN_TOOL, "s2", first=True, **call))
    assert model.row(model.sessions["s2"]).endswith("  [edit] Write login.py")
    model.apply(event(m.EventKind.TURN_TOOL, "s2", first=False, **{**call, "status": "completed"}))
    assert model.row(model.sessions["s2"]).endswith("  [edit] Write login.py")  # its last doing
    model.apply(event(m.EventKind.TURN_CHUNK, "s2", text="\nfixed it"))
    assert model.row(model.sessions["s2"]).endswith("  fixed it")
    model.apply(event(m.EventKind.TURN_TOOL, "s2", first=True, toolCallId="c2", title="Run pytest"))
    assert model.row(model.sessions["s2"]).endswith("  [tool] Run pytest")
    model.apply(event(m.EventKind.TURN_ENDED, "s2", stopReason="end_turn"))
    model.apply(event(m.EventKind.SESSION_STATUS, "s2", status="idle", since=0))
    assert model.row(model.sessions["s2"]).endswith("  fixed it")  # the answer, once it ended
    # Looked at mid-turn: the transcript's last line was a tool call.
    lines = [
        m.TranscriptLine(n=0, role="agent", text="checking"),
        m.TranscriptLine(n=1, role="tool", text="[read] Read setup.cfg"),
    ]
    model.tail("s4", m.Transcript(lines=lines, total=2))
    assert model.row(model.sessions["s4"]).endswith("  [read] Read setup.cfg")


def test_sessions_come_and_go_with_their_events(model: WatchModel) -> None:
    event = Log()
    model.apply(event(m.EventKind.SESSION_OPENED, "s5"))
    assert model.missing == {"s5"}
    model.add(info("s5"))
    assert list(model.sessions) == ["s1", "s2", "s3", "s4", "s5"]
    model.apply(event(m.EventKind.SESSION_CLOSED, "s1"))
    model.apply(event(m.EventKind.SESSION_STATUS, "s3", status="closed"))
    assert list(model.sessions) == ["s2", "s4", "s5"]
    assert model.selected == "s2"  # the selected one went: the first takes its place
    model.load(m.Snapshot(head=200, sessions=[info("s9")], fleet=m.Fleet(open=1)))  # a resync
    assert list(model.sessions) == ["s9"]


def test_a_session_an_event_came_for_while_it_was_read_is_read_again(model: WatchModel) -> None:
    """Its answer may have been made before that event: a turn cancelled as it started read
    "working" for good, while the header counted it stopped."""
    event = Log()
    model.apply(event(m.EventKind.SESSION_OPENED, "s5"))
    model.apply(event(m.EventKind.SESSION_OPENED, "s6"))
    assert model.read() == {"s5", "s6"}
    model.apply(event(m.EventKind.SESSION_STATUS, "s5", status="stopped"))  # before its answer is taken
    model.add(info("s5", m.SessionStatus.WORKING))
    model.add(info("s6"))
    model.done_reading()
    assert model.missing == {"s5"}  # read again; s6 heard nothing meanwhile
    assert model.read() == {"s5"}
    model.add(info("s5", m.SessionStatus.STOPPED))
    model.done_reading()
    assert (model.missing, model.sessions["s5"].status) == (set(), m.SessionStatus.STOPPED)


def test_a_view_of_one_agent_says_its_count_apart_from_the_fleets() -> None:
    """`watch --agent A`: the fleet line is every agent's, so the header says A's count beside it,
    and an empty list says which agent it shows (not that no session is open)."""
    model = WatchModel(agent="nope")
    model.load(m.Snapshot(head=100, sessions=[], fleet=m.Fleet(open=37, working=2)))
    assert model.header().startswith("sessiond watch  agent nope: 0 open · all agents: 2 working")
    assert model.empty_text() == (
        "no open sessions of agent nope (`sessiond agents` lists the agents; "
        "`sessiond watch` watches them all)"
    )
    assert WatchModel().empty_text() == "no open sessions (open one with `sessiond new`)"


def test_the_header_counts_the_selected_one_as_the_fleet_does(model: WatchModel) -> None:
    """It read "0 working · 1 needs you · 2 open  [working 1 of 1]" for a session asking."""
    event = Log()
    model.apply(event(m.EventKind.SESSION_STATUS, "s2", status="needs_you", since=0))
    model.apply(event(m.EventKind.FLEET, None, open=4, working=1, needsYou=1))
    handle_key(model, ord("n"))
    assert model.header() == "sessiond watch  1 working · 1 needs you · 4 open  [needs you 1 of 1]"
    handle_key(model, ord("n"))
    assert model.header().endswith("1 working · 1 needs you · 4 open  [working 1 of 1]")


def test_a_notice_goes_after_a_while_and_with_the_daemon_it_was_of(model: WatchModel) -> None:
    """An answered request's notice stayed on the bottom line for ten minutes and across a daemon
    restart, in place of what the selected session's "!" stands for."""
    event = Log()
    asked = {"permission": "p-1", "toolCall": {"title": "Edit ro.txt", "kind": "edit"}}
    model.apply(
        event(
            m.EventKind.PERMISSION_ASKED,
            "s1",
            **asked,
            options=[{"optionId": "y", "name": "Yes", "kind": "allow_once"}],
        )
    )
    model.apply(event(m.EventKind.SESSION_ATTENTION, "s1", attention=["plan_stalled"]))
    handle_key(model, ord("a"))
    model.apply(event(m.EventKind.PERMISSION_ANSWERED, "s1", permission="p-1", optionId="y"))
    assert model.footer() == "s1: Yes: [edit] Edit ro.txt"
    assert model.expire(model.notice_until - NOTICE_SECONDS) == NOTICE_SECONDS  # (the time it has left)
    assert model.expire(model.notice_until) is None
    assert model.footer() == f"s1 ! plan_stalled · {KEYS_HELP}"
    model.say("s1: Yes: [edit] Edit ro.txt")
    model.load(m.Snapshot(head=300, sessions=[info("s1")], fleet=m.Fleet(open=1)))  # another daemon
    assert model.footer() == KEYS_HELP


def test_keys_step_between_working_sessions_and_open_one(model: WatchModel) -> None:
    assert model.selected == "s1"
    assert model.working() == ["s2", "s4"]
    handle_key(model, ord("n"))
    assert model.selected == "s2"
    assert model.header().endswith("[working 1 of 2]")
    handle_key(model, ord("n"))
    assert model.selected == "s4"
    handle_key(model, ord("n"))
    assert model.selected == "s2"  # wraps
    handle_key(model, ord("p"))
    assert model.selected == "s4"
    handle_key(model, ord("k"))
    assert model.selected == "s3"
    handle_key(model, ord("\n"))
    assert model.opened == "s3"
    assert model.detail()[0] == "id          s3"
    handle_key(model, ord("n"))  # stepping while one is open opens the next working one
    assert (model.selected, model.opened) == ("s4", "s4")
    handle_key(model, 27)
    assert model.opened is None
    assert handle_key(model, ord("q")) is False


# ---------------------------------------------------------------- in a real terminal


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    running.stop()
    shutil.rmtree(running.home, ignore_errors=True)


def test_watch_in_a_terminal_follows_the_sessions_and_opens_one(daemon: Daemon, tmp_path: Path) -> None:
    with connect(daemon.socket, start=False) as client:
        agent = client.agent("demo")
        idle, busy, other = agent.sessions(3, tmp_path)
        idle.send("plan A | B\nprogress 1 completed\nsay first done")
        tmux = Tmux([sys.executable, "-m", "sessiond.client", "watch"], daemon.env)
        try:
            screen = tmux.wait_for(lambda s: "first done" in s)
            assert screen.splitlines()[0].startswith("sessiond watch  0 working · 3 open")
            assert row_of(screen, idle.id).startswith(">")  # the first row is selected
            # Named by its first prompt's first line.
            assert cells(screen, idle.id)[:8] == [idle.id, "plan", "A", "|", "B", "demo", "idle", "1/2"]
            script = "plan Look | Fix\nprogress 1 in_progress\nsay looking now\nwrite notes.txt seen\nhang"
            turn = subprocess.Popen(
                [sys.executable, "-m", "sessiond.client", "send", busy.id, script],
                env=daemon.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            # What it does now, a tool call made after it spoke, is its last line.
            screen = tmux.wait_for(lambda s: "[edit] Write notes.txt" in row_of(s, busy.id))
            # Its title, the script's first line, is four words: its status the sixth cell.
            assert cells(screen, busy.id)[:8] == [
                busy.id,
                "plan",
                "Look",
                "|",
                "Fix",
                "demo",
                "working",
                "0/2",
            ]
            # The header is the fleet summary, sent at most ten times a second: wait for it.
            screen = tmux.wait_for(lambda s: "1 working · 3 open" in s.splitlines()[0])
            tmux.keys("n")  # to the one working session
            screen = tmux.wait_for(lambda s: "[working 1 of 1]" in s)
            assert row_of(screen, busy.id).startswith(">")
            tmux.keys("Enter")  # open it: its plan and transcript, kept current
            screen = tmux.wait_for(lambda s: "plan (0 of 2 done)" in s and "agent   looking now" in s)
            assert f"id          {busy.id}" in screen
            assert "  [>] Look" in screen
            tmux.keys("Escape")
            tmux.wait_for(lambda s: "LAST LINE" in s)
            tmux.run("resize-window", "-t", "watch", "-x", "100", "-y", "20")  # redrawn at the new size
            screen = tmux.wait_for(lambda s: len(s.splitlines()) == 20 and s.startswith("sessiond watch"))
            assert screen.splitlines()[-1].startswith("j/k move")
            assert cells(screen, busy.id)[6] == "working"
            other.send("say the third one spoke")
            tmux.wait_for(lambda s: "the third one spoke" in row_of(s, other.id))
            assert busy.cancel() == 1
            turn.wait(30)
            tmux.wait_for(lambda s: cells(s, busy.id)[6] == "stopped")
            tmux.wait_for(lambda s: "0 working · 3 open" in s.splitlines()[0])  # the fleet follows
            tmux.quit()
        finally:
            tmux.kill()


def test_watch_waits_out_a_daemon_that_went_away_and_follows_the_next(daemon: Daemon, tmp_path: Path) -> None:
    with connect(daemon.socket, start=False) as client:
        session = client.agent("demo").session(tmp_path)
        session.send("say before")
    tmux = Tmux([sys.executable, "-m", "sessiond.client", "watch"], daemon.env)
    try:
        tmux.wait_for(lambda s: "before" in row_of(s, session.id))
        daemon.stop(signal.SIGKILL)  # killed: no goodbye
        screen = tmux.wait_for(lambda s: "the daemon is gone" in s.splitlines()[0])
        assert "back when one answers again" in screen.splitlines()[0]
        assert "before" in row_of(screen, session.id)  # what it last said stays shown
        assert tmux.alive()
        daemon.start()  # the same home: its sessions come back
        with connect(daemon.socket, start=False) as client:
            client.session(session.id).send("say after the restart")
        tmux.wait_for(lambda s: "after the restart" in row_of(s, session.id))
        # The header is the new daemon's fleet summary (sent at most ten times a second): wait for it.
        tmux.wait_for(lambda s: s.splitlines()[0].startswith("sessiond watch  0 working · 1 open"))
        tmux.quit()
    finally:
        tmux.kill()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_turn_after_the_daemon_came_back_starts_a_fresh_last_line(
    daemon: Daemon, tmp_path: Path, stop: signal.Signals
) -> None:
    """The view held `done` from before the daemon went; the new daemon's turn says its first
    words once the view is back: they are the row's last line, not joined onto `done`."""
    with connect(daemon.socket, start=False) as client:
        session = client.agent("demo").session(tmp_path)
        session.send("say done")
    tmux = Tmux([sys.executable, "-m", "sessiond.client", "watch"], daemon.env)
    sender: subprocess.Popen[bytes] | None = None
    try:
        tmux.wait_for(lambda s: row_of(s, session.id).rstrip().endswith("  done"))
        daemon.stop(stop)
        tmux.wait_for(lambda s: "the daemon is gone" in s.splitlines()[0])
        # The view looks for a daemon again only once the new turn is on (as when `send` starts the
        # daemon itself): it misses the turn's start. Its first words wait for an answer, so the view
        # is back (it shows the question) before them.
        view = int(tmux.run("display", "-p", "-t", "watch", "#{pane_pid}"))
        os.kill(view, signal.SIGSTOP)
        try:
            daemon.start()
            with (
                connect(daemon.socket, start=False) as client,
                client.events(sessions=[session.id], kinds=[m.EventKind.PERMISSION_ASKED]) as asked,
            ):
                sender = subprocess.Popen(
                    [sys.executable, "-m", "sessiond.client", "send", session.id, "ask go on?\nhang"],
                    env=daemon.env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                next(iter(asked))
        finally:
            os.kill(view, signal.SIGCONT)
        tmux.wait_for(lambda s: "asks: [other] go on?" in row_of(s, session.id))
        allowed = subprocess.run(
            [sys.executable, "-m", "sessiond.client", "allow", session.id],
            env=daemon.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert allowed.returncode == 0, allowed.stderr
        screen = tmux.wait_for(lambda s: 'go on?": Allow' in row_of(s, session.id))
        assert row_of(screen, session.id).rstrip().endswith('  Asked "go on?": Allow')
        tmux.quit()
    finally:
        tmux.kill()
        if sender is not None:
            with connect(daemon.socket, start=False) as client:
                client.session(session.id).cancel()
            sender.wait(30)


def test_watch_takes_an_answers_notice_away_and_names_a_flag(daemon: Daemon, tmp_path: Path) -> None:
    """The bottom line said `s1: Allow: ...` until the next key; after it, the flag of the selected
    session ("!") is named there again, with no key pressed."""
    with connect(daemon.socket, start=False) as client:
        session = client.agent("demo", plan_stall_seconds=1).session(tmp_path)
    tmux = Tmux([sys.executable, "-m", "sessiond.client", "watch"], daemon.env)
    sender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sessiond.client",
            "send",
            session.id,
            "plan A | B\nprogress 1 in_progress\nask go on?\nhang",
        ],
        env=daemon.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        tmux.wait_for(lambda s: "asks: [other] go on?" in row_of(s, session.id))
        tmux.keys("a")
        tmux.wait_for(lambda s: bottom(s) == f"{session.id}: Allow: [other] go on?")
        screen = tmux.wait_for(lambda s: "plan_stalled" in bottom(s), timeout=NOTICE_SECONDS + 10)
        assert bottom(screen).startswith(f"{session.id} ! ")
        assert row_of(screen, session.id).startswith(">!")
        tmux.quit()
    finally:
        tmux.kill()
        with connect(daemon.socket, start=False) as client:
            client.session(session.id).cancel()
        sender.wait(30)


def test_watch_fits_its_columns_to_the_terminal(daemon: Daemon, tmp_path: Path) -> None:
    """A wide terminal gives the title (and the last line) its room; on a narrow one the least
    important columns go and the bottom line keeps `q quit`. Wide characters take two cells."""
    with connect(daemon.socket, start=False) as client:
        long, wide = client.agent("demo").sessions(2, tmp_path)
        long.send("plan step one | step two | step three\nsay all done")  # titled by its first line
        wide.rename("日本語のタイトル")
        wide.send("say 短い答え")
    tmux = Tmux([sys.executable, "-m", "sessiond.client", "watch"], daemon.env)
    try:
        tmux.run("resize-window", "-t", "watch", "-x", "200", "-y", "20")
        screen = tmux.wait_for(lambda s: "step three demo " in row_of(s, long.id))  # the whole title
        assert row_of(screen, long.id).rstrip().endswith("  all done")

        def status_at(row: str) -> int:  # (in cells: a wide character takes two)
            return display_cells(row[: row.index(" idle ")])

        assert status_at(row_of(screen, long.id)) == status_at(row_of(screen, wide.id))
        assert row_of(screen, wide.id).rstrip().endswith("  短い答え")
        tmux.run("resize-window", "-t", "watch", "-x", "60", "-y", "20")
        screen = tmux.wait_for(lambda s: row_of(s, long.id).rstrip().endswith("  all done"))
        assert bottom(screen).endswith("q quit")
        assert status_at(row_of(screen, long.id)) == status_at(row_of(screen, wide.id))
        assert "demo" not in row_of(screen, long.id)  # the agent went, the last line stayed
        tmux.quit()
    finally:
        tmux.kill()
