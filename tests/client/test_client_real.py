"""Runs, stopping, wide batches and the newer CLI commands against the real daemon and demo agent."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from bench.harness import Daemon
from sessiond.client import aconnect, connect
from sessiond.client.wording import cells
from sessiond.protocol.models import EventKind, SessionStatus
from tests.daemon.scripted_agent import scripted_agent
from tests.terminal import Tmux

pytestmark = pytest.mark.timeout(120)

SESSIOND = [sys.executable, "-m", "sessiond.client"]


@pytest.fixture(scope="module")
def real() -> Iterator[Daemon]:
    """One daemon for the module: each test reads only what it made."""
    daemon = Daemon().start()
    yield daemon
    daemon.stop()
    shutil.rmtree(daemon.home, ignore_errors=True)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path


def sessiond(
    real: Daemon, *argv: str, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SESSIOND, *argv],
        env=real.env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        input=input,
    )


def line_within(stream: IO[str], seconds: float) -> str:
    """The next line of `stream`; AssertionError when none comes in time."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=seconds)
    except queue.Empty:
        raise AssertionError(f"no line in {seconds} s") from None


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    return subprocess.run(
        ["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "app.py").write_text("print('hello')\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


# ---------------------------------------------------------------- stopping is not failing


def test_ctrl_c_stops_a_cli_batch_and_the_run_reads_stopped(real: Daemon, work: Path) -> None:
    prompts = work / "prompts.txt"
    hanging = json.dumps({"prompt": "say waiting\nhang"})  # a prompt of two lines, as a JSON line
    prompts.write_text("say quick\n" + f"{hanging}\n" * 4)
    with (
        connect(real.socket, start=False) as watcher,
        watcher.events(kinds=[EventKind.TURN_STARTED, EventKind.TURN_ENDED]) as turns,
    ):
        batch = subprocess.Popen(
            [sys.executable, "-m", "sessiond.client", "batch", "--root", str(work), str(prompts)],
            env=real.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started = ended = 0
        for event in turns:  # the quick one answered, the four others hang
            started += event.kind is EventKind.TURN_STARTED
            ended += event.kind is EventKind.TURN_ENDED
            if (started, ended) == (5, 1):
                break
        assert batch.stdout is not None
        assert line_within(batch.stdout, 60) == "quick\n"  # printed as it came, before the stop
        batch.send_signal(signal.SIGINT)
        out, err = batch.communicate(timeout=60)
        assert batch.returncode == 130, err
        assert out == ""
        note, again = err.splitlines()[-2:]
        assert note.endswith(
            "stopped: every outstanding turn was cancelled; prompts 2…5 unanswered; "
            f"run {watcher.runs()[-1].id} recorded as stopped"
        )
        assert again == f"sessiond: to run them again: sessiond batch {prompts} --root {work} --only 2-5"
        run = watcher.runs()[-1]
        assert (run.name, run.outcome, run.sessions) == ("batch prompts.txt", "stopped", 5)
        sessions = [s.info for s in watcher.sessions(run=run.id, include_closed=True)]
        assert sorted(s.last_stop_reason or "" for s in sessions) == ["cancelled"] * 4 + ["end_turn"]
        assert {s.status for s in sessions} == {SessionStatus.CLOSED}
        assert watcher.agent("demo").get().process.active_turns == 0
        ended = [e for e in watcher.trace(run=run.id, kinds=[EventKind.TURN_ENDED])]
        assert sorted(e.data.get("stopReason") for e in ended) == ["cancelled"] * 4 + ["end_turn"]
    # The command it printed runs those four again, and only those (the file now says what to do).
    prompts.write_text("say quick\n" + "".join(f"say again {n}\n" for n in range(2, 6)))
    rerun = subprocess.run(
        [*SESSIOND, *shlex.split(again.removeprefix("sessiond: to run them again: "))[1:]],
        env=real.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (rerun.returncode, rerun.stdout) == (0, "again 2\nagain 3\nagain 4\nagain 5\n"), rerun.stderr


async def test_cancelling_an_async_flow_stops_its_run_and_every_turn(real: Daemon, work: Path) -> None:
    async with aconnect(real.socket, start=False) as watcher:
        async with watcher.events(kinds=[EventKind.TURN_STARTED]) as started:

            async def flow() -> None:
                async with aconnect(real.socket, start=False, run="async flow") as daemon:
                    await (await daemon.agent()).abatch(["hang"] * 3, work)

            task = asyncio.create_task(flow())
            count = 0
            async for _ in started:
                count += 1
                if count == 3:
                    break
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        run = (await watcher.runs())[-1]
        assert (run.name, run.outcome) == ("async flow", "stopped")
        sessions = await watcher.sessions(run=run.id, include_closed=True)
        assert [(s.info.status, s.info.last_stop_reason) for s in sessions] == [
            (SessionStatus.CLOSED, "cancelled")
        ] * 3
        assert (await (await watcher.agent("demo")).aget()).process.active_turns == 0


async def test_five_hundred_prompts_land_in_order_and_the_run_has_its_times(real: Daemon, work: Path) -> None:
    async with aconnect(real.socket, start=False, run="five hundred") as daemon:
        prompts = [f"say answer {n}" for n in range(500)]
        replies = await (await daemon.agent()).abatch(prompts, work, max_concurrency=None)
        assert [r.text for r in replies] == [f"answer {n}" for n in range(500)]
        assert daemon.run is not None
        run_id = daemon.run.id
    listed = sessiond(real, "runs")
    row = next(line for line in listed.stdout.splitlines() if line.startswith(run_id))
    assert row.split()[:4] == [run_id, "completed", "500", "500"]
    shown = sessiond(real, "runs", run_id, "--json")
    run = json.loads(shown.stdout)
    assert (run["sessions"], run["turns"], run["outcome"]) == (500, 500, "completed")
    assert 0 < run["wallSeconds"] < run["serialSeconds"]  # they ran side by side
    text = sessiond(real, "runs", run_id).stdout
    assert "turns ran " in text


async def test_answers_come_in_order_when_later_prompts_finish_first(real: Daemon, work: Path) -> None:
    async with aconnect(real.socket, start=False) as daemon:
        finished: list[str] = []
        async with daemon.events(kinds=[EventKind.TURN_ENDED]) as ended:
            prompts = ["sleep 0.4\nsay slow", "sleep 0.2\nsay middle", "say fast"]
            batch = asyncio.create_task((await daemon.agent()).abatch(prompts, work))
            async for event in ended:
                finished.append(event.session or "")
                if len(finished) == 3:
                    break
            replies = await batch
        assert [r.text for r in replies] == ["slow", "middle", "fast"]
        assert finished == [r.session for r in reversed(replies)]


# ---------------------------------------------------------------- the commands


def test_show_marks_the_files_two_sessions_commands_may_both_have_made(real: Daemon, work: Path) -> None:
    """Two sessions in one working copy whose agents' own commands ran at once: `show` lists
    the files both may have made for both, saying with whom each is shared. (Each command first
    leaves a marker and waits for the other's: a marker made before the other session's turn
    began is its maker's alone, and two `sessiond send` processes may start seconds apart.)"""
    one, two = sessiond(real, "new", "--root", str(work), "-n", "2", "--placement", "here").stdout.split()
    wait_for = "while [ ! -f {0} ]; do sleep 0.02; done"
    scripts = {
        one: f"shell sh -c 'touch one-up; {wait_for.format('two-up')}; echo 1 > one.txt'",
        two: f"shell sh -c 'touch two-up; {wait_for.format('one-up')}; echo 2 > two.txt'",
    }
    sends = [
        subprocess.Popen(
            [sys.executable, "-m", "sessiond.client", "send", session, script],
            env=real.env,
            stdout=subprocess.DEVNULL,
        )
        for session, script in scripts.items()
    ]
    assert [send.wait(timeout=60) for send in sends] == [0, 0]
    made_by_both = {"one.txt", "two.txt"}  # each made once both commands were under way
    with connect(real.socket, start=False) as daemon:
        # The changed files are counted after the turns: wait until both list those two.
        for session in (one, two):
            for event in daemon.trace(sessions=[session], kinds=[EventKind.SESSION_CHANGES], follow=True):
                if made_by_both <= {f["path"] for f in event.data["changes"]["files"]}:
                    break
    for me, other in ((one, two), (two, one)):
        shown = sessiond(real, "show", me).stdout.splitlines()
        for name in sorted(made_by_both):
            line = rf"^  A {re.escape(name)} +\+1 -0  \(shared with {other}\)$"
            assert any(re.match(line, row) for row in shown), (name, shown)


def test_show_trace_fleet_and_the_run_of_a_cli_batch(real: Daemon, work: Path) -> None:
    batch = sessiond(
        real, "batch", "--root", str(work), "-", "--json", input='say one\n{"prompt": "say two"}\n'
    )
    assert batch.returncode == 0, batch.stderr
    answers = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [a["text"] for a in answers] == ["one", "two"]
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    script = "\n".join(
        [
            "plan Read | Write",
            "progress 1 completed",
            "write notes.txt a\\nb",
            "usage 1000 200000 0.5",
            "say wrote notes",
        ]
    )
    assert sessiond(real, "send", session, script).returncode == 0
    with connect(real.socket, start=False) as daemon:
        # The changed files are counted after the turn: wait for them, from the log.
        for event in daemon.trace(sessions=[session], kinds=[EventKind.SESSION_CHANGES], follow=True):
            if event.data["changes"]["files"]:
                break
    shown = sessiond(real, "show", session).stdout.splitlines()
    assert "context     1,000 of 200,000 tokens (0.5%), $0.5000" in shown
    assert shown[shown.index("plan (1 of 2 done)") + 1 :][:2] == ["  [x] Read", "  [ ] Write"]
    assert "  A notes.txt  +2 -0" in shown
    assert shown[-1] == "  agent   wrote notes"
    traced = sessiond(real, "trace", "--session", session, "--kind", "turn.ended")
    (ended,) = [json.loads(line) for line in traced.stdout.splitlines()]
    assert (ended["session"], ended["data"]["stopReason"]) == (session, "end_turn")
    recent = sessiond(real, "trace", "--session", session, "--kind", "turn.ended", "--last", "1h")
    assert recent.stdout == traced.stdout  # (within the hour)
    # Over before this command started: nothing in its last millisecond.
    assert sessiond(real, "trace", "--session", session, "--last", "0.001s").stdout == ""
    bogus = sessiond(real, "trace", "--last", "soon")
    assert (bogus.returncode, bogus.stderr) == (
        2,
        "sessiond: --last takes a duration such as 90s, 15m, 1h or 2d, not 'soon'\n",
    )
    run_id = json.loads(sessiond(real, "runs", "--json").stdout.splitlines()[-1])["id"]
    of_run = [json.loads(line) for line in sessiond(real, "trace", "--run", run_id).stdout.splitlines()]
    assert {e["session"] for e in of_run} == {a["session"] for a in answers}
    fleet = sessiond(real, "fleet").stdout.splitlines()
    assert fleet[0].startswith("fleet      0 working · ")


def test_side_tasks_and_tree(real: Daemon, work: Path) -> None:
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    assert sessiond(real, "send", session, "say main work").returncode == 0
    side = sessiond(real, "side", session, "say", "beside")
    assert (side.returncode, side.stdout) == (0, "beside\n"), side.stderr
    side_id = side.stderr.split()[2]
    with connect(real.socket, start=False) as daemon:
        transcript = daemon.session(session).transcript()
        assert [line.text for line in transcript.lines] == ["say main work", "main work"]  # untouched
        task = daemon.suggest_task("Tidy up", "say tidied", from_session=session)
        other = daemon.suggest_task("Not this", "say no", from_session=session)
    listed = sessiond(real, "tasks", "--json")
    assert {t["id"] for t in map(json.loads, listed.stdout.splitlines())} >= {task.id, other.id}
    accepted = sessiond(real, "tasks", "accept", task.id)
    assert accepted.stdout.startswith(f"accepted {task.id} "), accepted.stderr
    dismissed = sessiond(real, "tasks", "dismiss", other.id, "--reason", "out of scope")
    assert dismissed.stdout == f"dismissed {other.id}: out of scope\n"
    tree = sessiond(real, "tree", session).stdout.splitlines()
    assert tree[1].split()[:2] == [session, "main"]
    assert int(tree[1].split()[3]) > 0  # the tokens the demo agent counted, the tree's together
    assert any(line.split()[:2] == [side_id, "side"] and line.startswith("  ") for line in tree)
    assert any(line.split()[:3] == [other.id, "task", "dismissed"] for line in tree)


def test_merge_a_worktree_session_then_a_conflict_then_the_queue(real: Daemon, work: Path) -> None:
    repo = make_repo(work / "repo")
    opened = sessiond(real, "new", "--root", str(repo), "--placement", "worktree", "--json")
    assert json.loads(opened.stdout)["placement"] == "worktree", opened.stderr
    with connect(real.socket, start=False) as daemon:
        first = daemon.session(json.loads(opened.stdout)["id"])
        second = daemon.agent("demo").session(repo, placement="worktree")
        first.send("edit app.py hello => first\nsay edited")
        second.send("edit app.py hello => second\nsay edited")
    merged = sessiond(real, "merge", first.id, "--gate", "grep -q first app.py")
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout.startswith(f"merged {first.id} (")
    assert merged.stdout.rstrip().endswith("worktree removed")
    assert f"merge {first.id}: gate-passed (grep -q first app.py)" in merged.stderr.splitlines()
    assert git(repo, "show", "main:app.py") == "print('first')\n"
    conflicted = sessiond(real, "merge", second.id)
    assert conflicted.returncode == 1
    lines = conflicted.stdout.splitlines()
    assert lines[0].startswith(f"merge of {second.id} (")
    assert lines[1:] == ["conflicts:", "  app.py", "main and the working copy are as they were"]
    assert git(repo, "show", "main:app.py") == "print('first')\n"
    queue = [json.loads(line) for line in sessiond(real, "merge", "--queue", "--json").stdout.splitlines()]
    assert {(e["session"], e["status"]) for e in queue} >= {(first.id, "merged"), (second.id, "failed")}


async def test_merge_with_a_failing_gate_reports_its_output(real: Daemon, work: Path) -> None:
    repo = make_repo(work / "repo")
    async with aconnect(real.socket, start=False) as daemon:
        session = await (await daemon.agent()).session(repo, placement="worktree")
        await session.asend("write extra.txt more\nsay wrote")
        entry = await session.amerge(gate="echo the tests failed; exit 3")
    assert entry.status == "failed"
    assert "the tests failed" in (entry.gate_output or "")
    assert git(repo, "ls-tree", "--name-only", "main").split() == ["app.py"]


def test_trace_follow_prints_new_events_until_ctrl_c(real: Daemon, work: Path) -> None:
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sessiond.client",
            "trace",
            "--follow",
            "--session",
            session,
            "--kind",
            "turn.ended",
        ],
        env=real.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sessiond(real, "send", session, "say first").returncode == 0
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())  # printed as it happened
        assert (first["session"], first["kind"]) == (session, "turn.ended")
        assert sessiond(real, "send", session, "say second").returncode == 0
        second = json.loads(follower.stdout.readline())
        assert second["seq"] > first["seq"]
    finally:
        follower.send_signal(signal.SIGINT)
        follower.communicate(timeout=30)
    assert follower.returncode == 130


def test_mode_and_option_of_a_session_from_the_command_line(real: Daemon, work: Path) -> None:
    sid = sessiond(real, "new", "--root", str(work)).stdout.strip()
    chose = sessiond(real, "mode", sid, "plan")
    assert chose.stdout == f"{sid}: mode plan (said to the agent when the session opens there)\n", chose
    assert sessiond(real, "send", sid, "model").stdout.startswith("Model: demo-small. Mode: plan.")
    listed = sessiond(real, "mode", sid).stdout.splitlines()
    assert [line[:16] for line in listed] == ["  default  Defau", "* plan     Plan:"], listed
    assert (
        sessiond(real, "option", sid).stdout == "model  Model: demo-small  (takes demo-small, demo-large)\n"
    )
    set_now = sessiond(real, "option", sid, "model", "demo-large")
    assert set_now.stdout == f"{sid}: model = demo-large (said to the agent now)\n", set_now
    refused = sessiond(real, "option", sid, "model", "huge")
    assert refused.returncode != 0
    assert "option 'model': takes one of demo-small, demo-large, not 'huge'" in refused.stderr
    half = sessiond(real, "option", sid, "model")
    assert half.returncode == 2
    assert "give an option and its value" in half.stderr
    shown = json.loads(sessiond(real, "mode", sid, "--json").stdout)
    assert (shown["mode"], shown["chosen"]) == ("plan", {"mode": "plan", "config": {"model": "demo-large"}})


def test_ls_and_tasks_with_no_row_to_print_say_why_and_what_to_do(work: Path) -> None:
    """A daemon of its own (nothing else open in it): `ls` or `tasks` printing no row says why on
    stderr, and what to do instead; stdout stays empty, as a script reading rows expects, and
    --json says nothing."""
    daemon = Daemon().start()
    try:
        said = [sessiond(daemon, *argv) for argv in (["ls"], ["ls", "--all"])]
        assert [(d.returncode, d.stdout) for d in said] == [(0, ""), (0, "")]
        assert said[0].stderr == (
            "sessiond: no open sessions; `sessiond ls --all` lists closed ones too, "
            "`sessiond new` opens one\n"
        )
        assert said[1].stderr == "sessiond: no sessions yet; `sessiond new` opens one\n"
        with connect(daemon.socket, start=False) as client:
            session = client.agent("demo").session(work)
            session.send("say done")
            session.close()
        gone = sessiond(daemon, "ls")
        assert (gone.stdout, gone.stderr) == ("", said[0].stderr)  # closed: left out unless --all
        assert re.search(rf"^{session.id} +demo +closed ", sessiond(daemon, "ls", "--all").stdout, re.M)
        none = sessiond(daemon, "ls", "--status", "working")
        assert (none.returncode, none.stdout) == (0, "")
        assert none.stderr == (
            "sessiond: no session matches (closed ones are left out: add --all); "
            "`sessiond ls` alone lists every open one\n"
        )
        quiet = sessiond(daemon, "ls", "--json")
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
        tasks = [sessiond(daemon, *argv) for argv in (["tasks"], ["tasks", "--status", "running"])]
        assert [(t.returncode, t.stdout) for t in tasks] == [(0, ""), (0, "")]
        assert tasks[0].stderr == (
            "sessiond: no tasks yet; an agent suggests them as it works (its suggest_task tool)\n"
        )
        assert tasks[1].stderr == "sessiond: no task matches; `sessiond tasks` alone lists every one\n"
        quiet = sessiond(daemon, "tasks", "--json")
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_ls_counts_the_turns_on_beside_the_ended_ones(real: Daemon, work: Path) -> None:
    """TURNS reads `ended+on`: a session on its first turn is `0+1`, not a bare `0` as if nothing
    had been asked; one more queued behind it makes `0+2`, and once they end the `+` goes."""
    with connect(real.socket, start=False) as client:
        session = client.agent("demo").session(work)
        senders = []
        try:
            with client.events(kinds=[EventKind.TURN_STARTED.value]) as started:
                senders.append(subprocess.Popen([*SESSIOND, "send", session.id, "hang"], env=real.env))
                assert next(iter(started)).session == session.id
            with client.events(kinds=[EventKind.TURN_QUEUED.value]) as queued:
                senders.append(subprocess.Popen([*SESSIOND, "send", session.id, "say next"], env=real.env))
                assert next(iter(queued)).session == session.id

            def row() -> list[str]:
                lines = sessiond(real, "ls", "--all").stdout.splitlines()
                return next(line.split() for line in lines if line.startswith(f"{session.id} "))

            assert row()[1:4] == ["demo", "working", "0+2"]
            assert sessiond(real, "cancel", session.id).returncode == 0
            for sender in senders:
                sender.wait(30)
            assert row()[3] == "2"  # both ended (cancelled), none on
        finally:
            for sender in senders:
                sender.kill()


def test_a_prompt_to_a_closed_session_says_how_to_open_another_once(real: Daemon, work: Path) -> None:
    """The daemon's hint names its method and the command line's command; `sessiond` says only its
    own (it said both, one after the other)."""
    with connect(real.socket, start=False) as client:
        session = client.agent("demo").session(work)
        session.close()
    done = sessiond(real, "send", session.id, "say hello")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"sessiond: session '{session.id}' is closed; reopen it with `sessiond reopen {session.id}`, "
        "or open a new one with `sessiond new`\n"
    )


# ---------------------------------------------------------------- what the command line says


def test_a_cli_batch_prints_each_answer_once_those_before_it_are_in(real: Daemon, work: Path) -> None:
    """Answers stay in prompt order, and each is printed (flushed) as soon as it and every one
    before it are in, not once the last is: the third answer, in while the second hangs, waits;
    Ctrl-C then prints no more."""
    prompts = work / "prompts.txt"
    prompts.write_text("say one\n" + json.dumps({"prompt": "say two\nhang"}) + "\nsay three\n")
    with (
        connect(real.socket, start=False) as watcher,
        watcher.events(kinds=[EventKind.TURN_ENDED]) as ended,
    ):
        batch = subprocess.Popen(
            [*SESSIOND, "batch", "--root", str(work), "--json", str(prompts)],
            env=real.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert batch.stdout is not None
            first = json.loads(line_within(batch.stdout, 60))  # while the second still hangs
            assert (first["index"], first["text"]) == (0, "one")
            turns = iter(ended)
            for _ in range(2):  # the first and the third
                next(turns)
            assert batch.poll() is None
            batch.send_signal(signal.SIGINT)
            out, err = batch.communicate(timeout=60)
        finally:
            batch.kill()
    assert batch.returncode == 130, err
    assert out == ""  # the third is in, but not the second before it
    # The third ended at the daemon; its answer may still be on its way to the CLI at the Ctrl-C,
    # and then the CLI names it unanswered too. The first, printed, is never named.
    note, again = err.splitlines()[-2:]
    run = note.rsplit("run ", 1)[1]
    assert note.endswith((f"prompt 2 unanswered; run {run}", f"prompts 2…3 unanswered; run {run}"))
    assert note.endswith("recorded as stopped")
    told = f"again: sessiond batch {prompts} --root {work} --json --only "
    assert again.endswith((f"{told}2", f"{told}2-3"))


def test_send_says_when_the_agent_has_gone_quiet(real: Daemon, work: Path) -> None:
    """A turn whose agent says nothing for silence_seconds: `send` says so on stderr, with what to
    do, as `show` and `watch` do (an agent retrying its model API for minutes looked dead)."""
    with connect(real.socket, start=False) as client:
        demo = client.agent("demo").get().command
        quiet = client.agent("quiet", command=demo, silence_seconds=1)
        session = quiet.session(work).id
        send = subprocess.Popen(
            [*SESSIOND, "send", session, "hang"],
            env=real.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert send.stderr is not None
            said = line_within(send.stderr, 60)
            assert re.fullmatch(
                r"sessiond: no word from the agent since [\d:]+; wait, or cancel the turn\n", said
            )
            assert sessiond(real, "cancel", session).returncode == 0
            out, err = send.communicate(timeout=60)
        finally:
            send.kill()
        quiet.remove()
    assert (send.returncode, out) == (1, "")
    assert "cancelled" in err


def test_close_says_which_side_chats_went_with_the_session(real: Daemon, work: Path) -> None:
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    assert sessiond(real, "send", session, "say main").returncode == 0
    sides = []
    for question in ("one?", "two?"):
        told = re.search(r"side chat (s\d+)", sessiond(real, "side", session, question).stderr)
        assert told is not None
        sides.append(told.group(1))
    closed = sessiond(real, "close", session)
    assert closed.stdout == f"closed {session} and its side chats {sides[0]}…{sides[1]}\n"
    with connect(real.socket, start=False) as client:
        assert [client.session(s).get().status for s in sides] == [SessionStatus.CLOSED] * 2
    assert sessiond(real, "close", session).stdout == f"closed {session}\n"  # (again: nothing more)


def test_send_says_when_the_agent_could_not_restore_the_session(real: Daemon, work: Path) -> None:
    """An agent that cannot restore a session (no session/load or resume) after its process
    restarted answers in a new conversation: send says so on stderr, the answer alone on stdout."""
    with connect(real.socket, start=False) as client:
        agent = client.agent("forgets", command=scripted_agent(work, "answers"))
        session = sessiond(real, "new", "--agent", agent.name, "--root", str(work)).stdout.strip()
        assert sessiond(real, "send", session, "hello").returncode == 0
        pid = agent.get().process.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # its next turn starts a new process
        deadline = time.monotonic() + 60
        while agent.get().process.state == "running":
            assert time.monotonic() < deadline, "the daemon did not see its agent end"
            time.sleep(0.05)
        again = sessiond(real, "send", session, "hello again")
        agent.remove()
    assert (again.returncode, again.stdout) == (0, ""), again.stderr  # (it says nothing)
    assert again.stderr == (
        "sessiond: agent 'forgets' could not restore the session (no session/resume or "
        "session/load): this turn started a new conversation without the earlier history\n"
    )


def test_a_batch_file_not_in_utf8_is_refused_before_anything_runs(real: Daemon, work: Path) -> None:
    (work / "bad.txt").write_bytes(b"say one\nsay caf\xe9\n")
    runs = len(sessiond(real, "runs", "--json").stdout.splitlines())
    refused = sessiond(real, "batch", "--agent", "demo", "bad.txt", cwd=work)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "sessiond: bad.txt line 2: not UTF-8 text (byte 0xe9); save it as UTF-8\n"
    piped = subprocess.run(
        [*SESSIOND, "batch", "-"], env=real.env, input=b"say caf\xe9\n", capture_output=True, timeout=60
    )
    assert (piped.returncode, piped.stderr) == (
        2,
        b"sessiond: stdin line 1: not UTF-8 text (byte 0xe9); save it as UTF-8\n",
    )
    assert len(sessiond(real, "runs", "--json").stdout.splitlines()) == runs  # nothing ran


def test_send_reads_the_prompt_from_stdin_for_a_dash(real: Daemon, work: Path) -> None:
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    # Over what one argument of a command line may hold (128 KiB): a comment, then the command.
    prompt = "# " + "x" * 300_000 + "\nsay read from stdin\n"
    sent = sessiond(real, "send", session, "-", input=prompt)
    assert (sent.returncode, sent.stdout, sent.stderr) == (0, "read from stdin\n", "")
    told = " ".join(sessiond(real, "send", "--help").stdout.split())
    assert "- reads it from stdin" in told


def test_show_cuts_a_long_transcript_line_and_says_where_it_is_whole(real: Daemon, work: Path) -> None:
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    long = "x" * 5000
    assert sessiond(real, "send", session, f"say {long}").returncode == 0
    shown = sessiond(real, "show", session).stdout.splitlines()  # not a terminal: 200 characters
    assert shown[-3:] == [
        f"  user    say {long}"[:199] + "…",
        f"  agent   {long}"[:199] + "…",
        f"(lines cut to 200 characters: `sessiond show {session} --json` "
        f"or `sessiond trace --session {session}` gives them whole)",
    ]
    whole = json.loads(sessiond(real, "show", session, "--json").stdout)
    assert [line["text"] for line in whole["transcript"]["lines"]][-2:] == [f"say {long}", long]
    screen = at_a_terminal(real, 120, "show", session)  # at a terminal: at its width
    agent = next(line for line in screen if line.startswith("  agent   xxx"))
    assert agent == f"  agent   {long}"[:119] + "…"


def at_a_terminal(real: Daemon, columns: int, *argv: str) -> list[str]:
    """The lines a `sessiond` command prints at a terminal `columns` wide (tmux)."""
    command = f"read go; {shlex.join([*SESSIOND, *argv])}; echo EXIT=$?; read x"
    tmux = Tmux(["sh", "-c", command], real.env)  # (it waits for Enter: first the terminal's size)
    try:
        tmux.run("resize-window", "-t", "watch", "-x", str(columns), "-y", "50")
        width = ("display", "-p", "-t", "watch", "#{window_width}")
        tmux.wait_for(lambda _: tmux.run(*width).strip() == str(columns))
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: "EXIT=0" in s).splitlines()
        return screen[1 : screen.index("EXIT=0")]  # (after the line of the Enter)
    finally:
        tmux.kill()


def test_ls_at_a_terminal_fits_its_width() -> None:
    """At a terminal `ls` never wraps a row: at 60 columns the least important columns go, and a
    row still too long is cut; at 200 a long recap is shown whole. Elsewhere it is as it was.
    (A daemon of its own, and a root of a known length: other sessions would share the room.)"""
    daemon = Daemon().start()
    work = Path(tempfile.mkdtemp(prefix="sd-ls-", dir="/tmp"))
    try:
        session = sessiond(daemon, "new", "--root", str(work), "--title", "日本語のタイトル").stdout.strip()
        other = sessiond(daemon, "new", "--root", str(work)).stdout.strip()
        recap = "the recap of this session runs on past sixty characters, to its end"
        assert sessiond(daemon, "send", session, f"say {recap}").returncode == 0
        narrow = at_a_terminal(daemon, 60, "ls")
        assert narrow[0].split() == ["ID", "AGENT", "STATUS", "TITLE", "RECAP"]  # the least important went
        assert len(narrow) == 3  # a line a session: none wrapped onto the next
        # (the title whole: under the 18 cells a title keeps before the recap has the rest)
        assert re.match(f"{session}  demo   idle    日本語のタイトル  the recap of ", narrow[1])
        assert (cells(narrow[1]), narrow[1][-1]) == (60, "…")  # cut at the edge
        assert narrow[2].split() == [other, "demo", "idle", "-"]
        wide = at_a_terminal(daemon, 200, "ls")
        assert wide[0].split() == [
            "ID",
            "AGENT",
            "STATUS",
            "TURNS",
            "PLAN",
            "CTX",
            "FILES",
            "ROOT",
            "TITLE",
            "RECAP",
        ]
        assert re.search(f"  日本語のタイトル  {re.escape(recap)}$", wide[1]), wide
        # Wide characters take two cells: the recap starts where the header says.
        assert cells(wide[1][: wide[1].index(recap)]) == wide[0].index("RECAP")
        piped = sessiond(daemon, "ls").stdout.splitlines()  # not a terminal: as before
        assert piped[1].endswith(f"日本語のタイトル  {recap[:59]}…")
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def test_the_command_line_says_in_its_own_words_what_it_checks_itself(real: Daemon, work: Path) -> None:
    no_id = sessiond(real, "show", "")
    assert (no_id.returncode, no_id.stdout, no_id.stderr) == (2, "", "sessiond: a session id is needed\n")
    session = sessiond(real, "new", "--root", str(work)).stdout.strip()
    empty = sessiond(real, "send", session, "")
    assert (empty.returncode, empty.stderr) == (2, "sessiond: the prompt is empty: nothing sent\n")
    unknown = sessiond(real, "trace", "--session", "s-nope")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == "sessiond: no session 's-nope'; list sessions with `sessiond ls --all`\n"
    assert sessiond(real, "send", session, "say one").returncode == 0
    page = work / "one.html"
    drawn = sessiond(real, "trace", "--session", session, "--html", str(page))
    assert drawn.returncode == 0, drawn.stderr
    assert f"wrote {page} (" in drawn.stderr
    assert "KiB): 1 session, 1 turn" in drawn.stderr


def test_a_cli_batch_at_a_terminal_shows_its_turns_running_and_its_clock_moving(
    real: Daemon, work: Path
) -> None:
    """A batch's bar shows what a burst of updates left undrawn, and its clock moves while no turn
    lands: a batch of slow turns sat at "0/N ... running 0 · waiting N  0.0 s" for minutes."""
    prompts = work / "prompts.txt"
    prompts.write_text("say one\nhang\nhang\n")
    command = shlex.join([*SESSIOND, "batch", "--root", str(work), str(prompts)])
    tmux = Tmux(["sh", "-c", f"{command}; sleep 60"], real.env)
    try:
        running = re.compile(r"1/3 .* running 2 · waiting 0  (\d+\.\d) s")
        seen = running.search(tmux.wait_for(lambda s: running.search(s) is not None))
        assert seen is not None
        later = float(seen.group(1)) + 1.0  # nothing lands meanwhile: the two hang
        tmux.wait_for(lambda s: float(running.search(s).group(1)) >= later)  # type: ignore[union-attr]
    finally:
        tmux.kill()


def test_a_command_run_in_a_deleted_folder_says_so(real: Daemon, work: Path) -> None:
    """It said "cannot reach the daemon: [Errno 2] No such file or directory", the daemon running."""
    prompts = work / "prompts.txt"
    prompts.write_text("say one\n")
    gone = work / "gone"
    gone.mkdir()
    for argv in (["batch", str(prompts)], ["new"]):
        command = shlex.join([*SESSIOND, *argv])
        ran = subprocess.run(
            ["sh", "-c", f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && {command}"],
            env=real.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 2, ran.stderr
        assert ran.stderr == (
            "sessiond: the current folder no longer exists (deleted or moved): cd to one that does, "
            "or give an absolute path (--root for a command)\n"
        )
        gone.mkdir()
    # Given a root, a batch runs.
    ran = subprocess.run(
        [
            "sh",
            "-c",
            f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && "
            + shlex.join([*SESSIOND, "batch", "--root", str(work), str(prompts)]),
        ],
        env=real.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ran.returncode, ran.stdout) == (0, "one\n"), ran.stderr
