"""The client end to end: the real daemon (`sessiond serve`) with the demo agent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiond.client import AgentError, SessionNotFound, aconnect, connect, launch
from sessiond.protocol import paths
from sessiond.protocol.models import EventKind, SessionStatus

pytestmark = pytest.mark.timeout(120)


class RealDaemon:
    def __init__(self, process: subprocess.Popen[str], socket: Path) -> None:
        self.process = process
        self.socket = socket
        self.output: list[str] = []

    def drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.output.append(line)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def real(home: Path) -> Iterator[RealDaemon]:
    """`sessiond serve` on the home's socket, until the test ends."""
    socket = paths.socket_path()
    process = subprocess.Popen(
        [sys.executable, "-m", "sessiond.client", "serve", "--socket", str(socket)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    daemon = RealDaemon(process, socket)
    assert process.stderr is not None
    for line in process.stderr:  # bounded by the test's timeout
        daemon.output.append(line)
        if line.startswith("sessiond: serving on"):
            break
    else:
        process.wait()
        pytest.fail(f"the daemon did not start (exit {process.returncode}):\n{''.join(daemon.output)}")
    threading.Thread(target=daemon.drain, daemon=True).start()
    yield daemon
    stop(process)


def test_sync_client_drives_the_demo_agent(real: RealDaemon, home: Path) -> None:
    with connect(start=False) as daemon:
        assert daemon.server_info["name"] == "sessiond"
        assert daemon.status().socket == str(real.socket)
        demo = daemon.agent("demo")
        session = demo.session(home)
        reply = session.send("say hello")
        assert (reply.text, reply.stop_reason) == ("hello", "end_turn")

        stream = session.stream("say one\nsay two")
        kinds, text = [], ""
        for event in stream:
            kinds.append(event.kind)
            if event.kind is EventKind.TURN_CHUNK:
                text += event.data["text"]
        assert kinds[0] is EventKind.TURN_QUEUED
        assert kinds[-1] is EventKind.TURN_ENDED
        assert stream.reply is not None
        assert text == stream.reply.text

        transcript = session.transcript()
        assert transcript.total >= 2
        assert (transcript.lines[-1].role, transcript.lines[-1].text) == ("agent", "two")
        assert transcript.lines[-1].turn == stream.turn_id
        assert daemon.fleet().open >= 1

        with pytest.raises(AgentError, match="boom"):
            session.send("fail boom")
        assert session.get().status is SessionStatus.FAILED
        assert session.id in [s.id for s in daemon.sessions()]
        with pytest.raises(SessionNotFound):
            daemon.session("no-such-session")
        assert session.close().status is SessionStatus.CLOSED


def test_cancelling_and_breaking_out_stop_the_turn(real: RealDaemon, home: Path) -> None:
    with connect(start=False) as daemon:
        session = daemon.agent().session(home)
        for event in session.stream("hang"):
            if event.kind is EventKind.TURN_STARTED:
                break
        reply = session.send("say after")  # the hung turn is gone: this one runs
        assert reply.text == "after"


async def test_async_client_batch_and_cancel(real: RealDaemon, home: Path) -> None:
    async with aconnect(start=False) as daemon:
        demo = await daemon.agent()
        replies = await demo.abatch([f"say answer {n}" for n in range(8)], home, max_concurrency=3)
        assert [r.text for r in replies] == [f"answer {n}" for n in range(8)]

        session = await demo.session(home)
        turn = asyncio.create_task(session.asend("hang"))
        async with daemon.events(sessions=[session.id]) as events:
            async for event in events:
                if event.kind is EventKind.TURN_STARTED:
                    break
        assert await session.acancel() == 1
        assert (await turn).stop_reason == "cancelled"

        task = asyncio.create_task(demo.abatch(["hang", "hang"], home))
        async with daemon.events(kinds=[EventKind.TURN_STARTED]) as events:
            started = 0
            async for _ in events:
                started += 1
                if started == 2:
                    break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        status = await daemon.status()
        assert status.sessions.get(SessionStatus.WORKING, 0) == 0


def cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`sessiond ARGV` as a user runs it, in `home` and with its SESSIOND_HOME."""
    return subprocess.run(
        [sys.executable, "-m", "sessiond.client", *argv],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,
    )


def sending(home: Path, session: str, prompt: str) -> subprocess.Popen[str]:
    """`sessiond send SESSION PROMPT` started as a user starts it, its output piped here."""
    return subprocess.Popen(
        [sys.executable, "-m", "sessiond.client", "send", session, prompt],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_command_line_against_the_real_daemon(real: RealDaemon, home: Path) -> None:
    def sessiond(*argv: str) -> subprocess.CompletedProcess[str]:
        return cli(home, *argv)

    new = sessiond("new")
    assert new.returncode == 0, new.stderr
    session = new.stdout.strip()
    sent = sessiond("send", session, "say", "hi", "there")
    assert (sent.returncode, sent.stdout, sent.stderr) == (0, "hi there\n", "")  # (a turn that ended well)
    failed = sessiond("send", session, "fail", "broken")
    assert failed.returncode == 1
    assert "broken" in failed.stderr
    crashed = sessiond("send", session, "say about to\ncrash 3")  # its agent exits mid-reply
    assert (crashed.returncode, crashed.stdout) == (1, "about to\n")  # the line ended before the error
    assert "agent 'demo' exited with code 3" in crashed.stderr
    listed = sessiond("ls")
    assert session in listed.stdout
    assert sessiond("close", session).stdout == f"closed {session}\n"


def test_ls_shows_each_sessions_plan_context_fill_and_changed_files(
    real: RealDaemon, home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for argv in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=work, check=True)
    busy, quiet = cli(home, "new", "-n", "2", "--root", str(work)).stdout.split()
    steps = [
        "plan Read | Write | Test",
        "progress 1 completed",
        r"write notes.txt one\ntwo",
        "usage 50000 200000",
    ]
    with (
        connect(real.socket, start=False) as daemon,
        daemon.events(sessions=[busy], kinds=["session.changes"]) as changes,
    ):
        sent = cli(home, "send", busy, "\n".join([*steps, "say done"]))  # (`\n` in TEXT: a new line)
        assert sent.returncode == 0, sent.stderr
        for event in changes:  # until its changed files are known
            if [f["path"] for f in (event.data.get("changes") or {}).get("files", [])] == ["notes.txt"]:
                break
    header, *rows = cli(home, "ls").stdout.splitlines()
    assert header.split() == [
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
    cells = {row.split()[0]: row.split() for row in rows}
    # 1 of 3 steps done, 25% of the context, one file of two lines added; the other has none of it.
    assert cells[busy][1:8] == ["demo", "idle", "1", "1/3", "25%", "1", "+2"]
    assert cells[busy][8:10] == ["-0", str(work)]
    assert cells[quiet][1:8] == ["demo", "idle", "0", "-", "-", "-", str(work)]
    assert header.index("PLAN") == rows[0].index("1/3" if rows[0].startswith(busy) else "-")  # aligned


def test_fleet_counts_ended_turns_and_says_what_is_working(real: RealDaemon, home: Path) -> None:
    def fleet() -> dict[str, str]:
        out = cli(home, "fleet").stdout
        return {key: value.strip() for key, value in (line.split(" ", 1) for line in out.splitlines())}

    with connect(real.socket, start=False) as daemon:
        session = daemon.agent("demo").session(home)
        with daemon.events(sessions=[session.id], kinds=["turn.started"]) as events:
            hanging = sending(home, session.id, "hang")
            next(iter(events))  # its turn runs
        working = fleet()
        assert (working["turns"], working["time"]) == ("0 ended, 1 working", "-")
        assert session.cancel() == 1
        hanging.communicate(timeout=30)  # (a cancelled turn: `send` exits 1)
    ended = fleet()
    assert ended["turns"] == "1 ended"
    assert re.fullmatch(r"turns ran \S+ \S+ in all; took \S+ \S+", ended["time"]), ended


def test_sessiond_stop_cancels_the_turns_and_waits_for_the_daemon_to_exit(
    real: RealDaemon, home: Path
) -> None:
    with connect(real.socket, start=False) as daemon:
        session = daemon.agent("demo").session(home)
        with daemon.events(sessions=[session.id], kinds=["turn.started"]) as events:
            hanging = sending(home, session.id, "hang")  # until cancelled
            next(iter(events))  # its turn runs
    stopped = cli(home, "stop")
    assert (stopped.returncode, stopped.stderr) == (0, "")
    assert stopped.stdout == f"stopped the daemon (pid {real.process.pid}); 1 turn was cancelled\n"
    # `stop` returns once the daemon closed its connection; the process exits right after.
    assert real.process.wait(30) == 0
    out, err = hanging.communicate(timeout=30)
    # The sender hears that the daemon stopped, not only that its turn was cancelled.
    assert (hanging.returncode, err) == (1, "sessiond: the turn was cancelled by the daemon stopping\n"), out
    again = cli(home, "stop")
    assert (again.returncode, again.stdout) == (0, f"no daemon is running at {real.socket}\n")


def test_send_whose_daemon_dies_keeps_the_reply_so_far_and_says_where_to_look(
    real: RealDaemon, home: Path
) -> None:
    with connect(real.socket, start=False) as daemon:
        session = daemon.agent("demo").session(home)
    sent = sending(home, session.id, "say begun\nhang")
    assert sent.stdout is not None
    assert sent.stdout.read(5) == "begun"  # shown as it came
    real.process.kill()
    out, err = sent.communicate(timeout=30)
    assert sent.returncode == 1
    assert out == "\n"  # the reply's line ended, so the sentence below starts on its own
    # (Closed, or reset should the daemon die with bytes of ours unread: either way it says so.)
    assert re.match(r"sessiond: the (daemon closed the connection|connection to the daemon broke)", err), err
    assert err.endswith(
        f"; the turn's answer went with it: `sessiond show {session.id}` says how it ended once a "
        "daemon runs again (`sessiond serve`)\n"
    )


def test_a_batch_whose_daemon_dies_prints_every_prompt_in_place_and_says_where_to_look(
    real: RealDaemon, home: Path
) -> None:
    prompts = home / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"say begun {i}\nhang"}) + "\n" for i in range(5)))
    with connect(real.socket, start=False) as daemon, daemon.events(kinds=["turn.started"]) as events:
        batch = subprocess.Popen(
            [sys.executable, "-m", "sessiond.client", "batch", str(prompts)],
            env={**os.environ, "SESSIOND_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=home,
        )
        started = iter(events)
        for _ in range(5):
            next(started)  # every turn runs
    real.process.kill()
    out, err = batch.communicate(timeout=60)
    assert batch.returncode == 1
    lines = out.splitlines()
    assert len(lines) == 5
    assert all(
        re.match(r"error: the (daemon closed the connection|connection to the daemon broke)", x)
        for x in lines
    )
    run = re.search(r"run (r-\w+) failed", err)
    assert run, err
    assert (
        "sessiond: the daemon went away during the batch; once one runs again (`sessiond serve`), "
        f"`sessiond ls --all --run {run.group(1)}` shows how each of its sessions ended\n"
    ) in err


@pytest.fixture
def started_daemon_stopped(home: Path) -> Iterator[None]:
    """Stop whatever daemon a test started in the background (its pid is in the socket's lock)."""
    yield
    lock = Path(f"{paths.socket_path()}.lock")
    pid = lock.read_text().strip() if lock.exists() else ""
    if pid.isdigit():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGTERM)


@pytest.mark.usefixtures("started_daemon_stopped")
def test_a_client_starts_the_daemon_when_none_runs(home: Path) -> None:
    socket = paths.socket_path()
    with connect() as daemon:  # start=True by default
        status = daemon.status()
        assert status.socket == str(socket)
    assert "sessiond: serving on" in launch.log_path().read_text()
    # It outlives the client that started it.
    with connect(start=False) as again:
        assert again.status().pid == status.pid


@pytest.mark.usefixtures("started_daemon_stopped")
def test_an_editor_spawning_stdio_gets_a_daemon_started(home: Path) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}
    ).encode()
    editor = subprocess.run(
        [sys.executable, "-m", "sessiond.client", "stdio"],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        input=b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
        capture_output=True,
        timeout=60,
    )
    assert editor.returncode == 0, editor.stderr
    _, _, answer = editor.stdout.partition(b"\r\n\r\n")
    assert json.loads(answer)["result"]["serverInfo"]["name"] == "sessiond"


def test_ctrl_c_stops_a_sync_batch_and_every_turn_in_it(real: RealDaemon, home: Path) -> None:
    script = textwrap.dedent(
        f"""
        from sessiond.client import connect
        with connect(start=False) as daemon:
            try:
                daemon.agent().batch(["hang"] * 5, {str(home)!r})
            except KeyboardInterrupt:
                print("interrupted", flush=True)
        """
    )
    with connect(start=False) as watcher, watcher.events(kinds=[EventKind.TURN_STARTED]) as started:
        batch = subprocess.Popen(
            [sys.executable, "-c", script],
            env={**os.environ, "SESSIOND_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for count, _ in enumerate(started, start=1):
            if count == 5:
                break
        batch.send_signal(signal.SIGINT)
        out, err = batch.communicate(timeout=60)
        assert (batch.returncode, out) == (0, "interrupted\n"), err
        sessions = watcher.sessions(include_closed=True)
        assert [(s.info.status, s.info.last_stop_reason) for s in sessions] == [
            (SessionStatus.CLOSED, "cancelled")
        ] * 5
