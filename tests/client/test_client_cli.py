"""The `sessiond` command against the fake daemon (it stands in for sessiond)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fake_sessiond import FakeDaemon

from sessiond.client import cli as cli_module
from sessiond.client import connect
from sessiond.client.cli import main, number_spans, relay
from sessiond.client.wording import context_cell, id_spans, money
from sessiond.protocol import models as m
from sessiond.protocol import paths
from sessiond.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_status_as_a_table_and_as_json(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "status")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("daemon    sessiond fake (pid 0) since ")
    assert f"socket    {paths.socket_path()}" in lines
    assert "sessions  0 open (none); 0 closed" in lines
    assert any(line.startswith("mcp       - (not started") for line in lines)
    code, out, _ = run(capsys, "status", "--json")
    (status,) = json_lines(out)
    assert status["socket"] == str(paths.socket_path())
    assert status["version"] == "fake"


def test_stop_says_how_to_stop_a_daemon_older_than_daemon_stop(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "stop")  # the stand-in has no daemon/stop, as daemons before it
    assert (code, out) == (1, "")
    assert "is older than this command and cannot be stopped over its socket" in err
    assert err.rstrip().endswith("stop it with: kill 0")


def test_new_ls_show_close(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(home)
    code, out, _ = run(capsys, "new", "--title", "first")
    assert code == 0
    (first,) = out.split()
    assert fake.params_of("session/open")[0] == {
        "agent": "demo",
        "root": str(home),
        "title": "first",
        "count": 1,
    }
    code, out, _ = run(capsys, "new", "--count", "2", "--root", "/", "--json")
    opened = json_lines(out)
    assert [s["root"] for s in opened] == ["/", "/"]
    assert all(s["status"] == "idle" for s in opened)

    code, out, _ = run(capsys, "ls")
    header, *rows = out.splitlines()
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
    assert [row.split()[0] for row in rows] == [first, opened[0]["id"], opened[1]["id"]]
    assert rows[0].split()[1:] == ["demo", "idle", "0", "-", "-", "-", str(home), "first"]
    assert rows[1].split()[1:] == ["demo", "idle", "0", "-", "-", "-", "/", "-"]  # no plan, title, recap yet
    assert header.index("STATUS") == rows[0].index("idle")  # aligned
    failed = fake.sessions[first]
    failed.status, failed.last_error, failed.recap = m.SessionStatus.FAILED, "tests failed", "an old answer"
    code, out, _ = run(capsys, "ls")
    assert out.splitlines()[1].endswith("first  error: tests failed")  # why, not the turn before's recap
    failed.status, failed.last_error, failed.recap = m.SessionStatus.IDLE, None, None

    code, out, _ = run(capsys, "close", str(opened[0]["id"]))
    assert (code, out) == (0, f"closed {opened[0]['id']}\n")
    code, out, _ = run(capsys, "ls", "--json")
    assert [s["id"] for s in json_lines(out)] == [first, opened[1]["id"]]
    code, out, _ = run(capsys, "ls", "--all", "--status", "closed", "--json")
    assert [s["id"] for s in json_lines(out)] == [opened[0]["id"]]
    code, out, _ = run(capsys, "show", first)
    assert f"id          {first}" in out.splitlines()
    code, out, _ = run(capsys, "show", first, "--json")
    assert json_lines(out)[0]["title"] == "first"


def test_agents_table_and_json(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "agents")
    assert out.splitlines()[0].split() == ["NAME", "PROCESS", "SESSIONS", "TURNS", "AUTH", "COMMAND"]
    assert out.splitlines()[1].split() == ["demo", "stopped", "0", "0", "-", "demo"]
    code, out, _ = run(capsys, "agents", "--json")
    assert code == 0
    assert [a["name"] for a in json_lines(out)] == ["demo"]
    # Under a cap of sessions open at the agent (maxLiveSessions, or claude's default), how full.
    process = fake.agents["demo"].process
    process.state, process.pid = m.AgentProcessState.RUNNING, 42
    process.live_sessions, process.live_cap = 3, 48
    _, out, _ = run(capsys, "agents")
    assert "running (pid 42, 3 of 48 open)" in out.splitlines()[1]


def test_agents_auth_says_what_was_used_in_a_word_and_fits_the_terminal(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gemini offers four ways to sign in and worked on the key in its env, with no `authenticate`:
    AUTH said "none (offers oauth-personal, ...)", as if not signed in, in a table 190 wide."""
    offered = ["oauth-personal", "gemini-api-key", "vertex-ai", "gateway"]
    process = fake.agents["demo"].process
    process.state = m.AgentProcessState.RUNNING
    process.auth_methods = [{"id": method, "name": method, "satisfied": False} for method in offered]
    fake.agents["demo"].command = ["gemini", "--experimental-acp", "--model", "gemini-2.5-pro", "-y"] * 4
    _, out, _ = run(capsys, "agents")
    assert out.splitlines()[1].split()[:5] == ["demo", "running", "0", "0", "-"]
    assert "oauth-personal" not in out
    _, out, _ = run(capsys, "agents", "--json")  # what it offers, there
    assert [a["id"] for a in json_lines(out)[0]["process"]["authMethods"]] == offered
    process.authenticated = "gemini-api-key"
    _, out, _ = run(capsys, "agents")
    assert out.splitlines()[1].split()[4] == "gemini-api-key"
    monkeypatch.setattr(cli_module, "_terminal_width", lambda: 60)  # at a terminal: within its width
    _, out, _ = run(capsys, "agents")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "PROCESS", "AUTH", "COMMAND"]  # the least important went
    assert row.split()[:3] == ["demo", "running", "gemini-api-key"]
    assert (len(row), row[-1]) == (60, "…")


def test_a_cost_no_agent_reported_is_not_shown_as_money(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    """codex sends no cost: `tree` and `runs` said $0.0000. A cost reported as 0 stays 0; the
    fleet's is a sum that cannot tell the two apart, and says so."""
    with connect(start=False, run="nightly") as daemon:
        parent = daemon.agent().session("/")
        parent.send("say hi")
        assert daemon.run is not None
        run_id = daemon.run.id
    child = new_session(capsys)
    fake.sessions[child].parent = parent.id
    _, out, _ = run(capsys, "tree", parent.id)
    assert [row.split()[4] for row in out.splitlines()[1:]] == ["-", "-"]
    _, out, _ = run(capsys, "runs", run_id)
    assert "cost       no cost reported" in out.splitlines()
    _, out, _ = run(capsys, "fleet")
    assert out.splitlines()[-1] == "cost       no cost reported"
    free = m.Cost(amount=0.0, currency="USD")
    fake.sessions[child].context = m.ContextFill(used=1, size=10, cost=free)
    _, out, _ = run(capsys, "tree", parent.id)
    assert [row.split()[4] for row in out.splitlines()[1:]] == ["$0.0000", "$0.0000"]  # a real 0
    fake.sessions[parent.id].context = m.ContextFill(used=1, size=10, cost=free)
    _, out, _ = run(capsys, "runs", run_id)
    assert "cost       $0.0000" in out.splitlines()
    assert money(0.00004) == "<$0.0001"  # a cost, if a small one


def new_session(capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run(capsys, "new", "--root", "/")
    assert code == 0
    return out.strip()


def test_send_streams_the_reply_and_says_nothing_of_a_turn_that_ended_well(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    code, out, err = run(capsys, "send", session, "say", "hello", "world")
    assert (code, out, err) == (0, "hello world\n", "")
    assert fake.params_of("session/prompt")[0]["prompt"] == "say hello world"


def test_send_failing_turn_exits_1_with_the_agents_message(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    code, out, err = run(capsys, "send", session, "fail", "it broke")
    assert (code, out, err) == (1, "", "sessiond: the agent failed the turn: it broke\n")


def test_errors_are_one_line_saying_what_to_do(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", "nope", "say x")
    assert (code, out) == (1, "")
    assert err == "sessiond: no session 'nope'; list sessions with `sessiond ls --all`\n"
    code, _, err = run(capsys, "new", "--count", "0")
    assert (code, err) == (2, "sessiond: --count must be at least 1, got 0\n")
    code, _, err = run(capsys, "new", "--agent", "bad name!")
    assert code == 2
    assert err.startswith("sessiond: agent/get: name: String should match pattern")
    with pytest.raises(SystemExit) as usage:
        main(["ls", "--status", "sleepy"])
    assert usage.value.code == 2


def test_no_daemon_running_says_how_to_start_one(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "ls")
    assert (code, out) == (1, "")
    assert (
        err == f"sessiond: no daemon is running at {paths.socket_path()}; start one with `sessiond serve`\n"
    )
    other = home / "x.sock"
    code, _, err = run(capsys, "--socket", str(other), "status")
    assert (
        err
        == f"sessiond: no daemon is running at {other}; start one with `sessiond serve --socket {other}`\n"
    )
    code, _, err = run(capsys, "status", "--socket", str(other))  # after the command works too
    assert str(other) in err


def test_cancel_tells_the_running_turn_to_stop(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    session = new_session(capsys)
    sender = threading.Thread(target=main, args=(["send", session, "hang"],))
    sender.start()
    fake.wait_for(lambda: fake.running("hang"))
    code, out, _ = run(capsys, "cancel", session)
    sender.join(10)
    assert (code, out.splitlines()[-1]) == (0, f"told 1 turn of {session} to stop")


def cli(*argv: str, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sessiond.client", *argv],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_during_send_cancels_the_turn_and_exits_130(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    session = new_session(capsys)
    sender = cli("send", session, "hang", home=home)
    fake.wait_for(lambda: fake.running("hang"))
    sender.send_signal(signal.SIGINT)
    out, err = sender.communicate(timeout=30)
    assert sender.returncode == 130, err
    assert out == ""
    assert err == "sessiond: interrupted; the turn was cancelled\n"
    assert [p["session"] for p in fake.params_of("session/cancel")] == [session], (
        " ".join(f"{msg.get('method')}:{msg.get('id')}" for msg in fake.received) + err
    )


def test_stdio_relays_an_editors_messages_to_the_daemon(fake: FakeDaemon, home: Path) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    editor = subprocess.run(
        [sys.executable, "-m", "sessiond.client", "stdio"],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        input=b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
        capture_output=True,
        timeout=30,
    )
    assert editor.returncode == 0, editor.stderr
    head, _, answer = editor.stdout.partition(b"\r\n\r\n")
    assert head == b"Content-Length: %d" % len(answer)
    assert json.loads(answer)["result"]["serverInfo"]["name"] == "sessiond"


def test_relay_copies_both_ways_until_the_daemon_closes(tmp_path: Path) -> None:
    ours, daemon_side = socket.socketpair()
    request = tmp_path / "stdin"  # a regular file, as when input is redirected from one
    request.write_bytes(b"ping")
    answers = tmp_path / "stdout"

    def daemon() -> None:
        received = b""
        while chunk := daemon_side.recv(100):  # until the relay shuts its side after stdin's end
            received += chunk
        daemon_side.sendall(b"pong:" + received)
        daemon_side.close()

    thread = threading.Thread(target=daemon)
    thread.start()
    with open(request, "rb") as stdin, open(answers, "wb") as stdout:
        assert relay(ours, stdin.fileno(), stdout.fileno()) == 0
    thread.join(10)
    assert answers.read_bytes() == b"pong:ping"


# ---------------------------------------------------------------- the newer commands


def test_show_gives_plan_context_changes_recap_and_transcript_tail(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    run(capsys, "send", session, "say all done")
    info = fake.sessions[session]
    info.plan = m.Plan(
        entries=[
            m.PlanEntry(content="Read", status="completed"),
            m.PlanEntry(content="Fix", status="in_progress"),
            m.PlanEntry(content="Test"),
        ],
        done=1,
        total=3,
    )
    info.context = m.ContextFill(
        used=41200, size=200000, percent=20.6, cost=m.Cost(amount=0.12, currency="USD")
    )
    info.changes = m.Changes(
        files=[
            m.ChangedFile(path="src/app.py", kind="modified", added=4, removed=1),
            m.ChangedFile(path="new.py", kind="added", added=10),
            m.ChangedFile(path="out.log", kind="added", added=1, shared=True, shared_with=["s7"]),
            m.ChangedFile(
                path="b.txt", kind="added", shared=True, shared_with=["s2", "s3", "s4", "s5", "s6"]
            ),
        ],
        added=15,
        removed=1,
        others=[m.ChangedFile(path="theirs.txt", kind="added", added=1)],
    )
    code, out, _ = run(capsys, "show", session)
    assert code == 0
    lines = out.splitlines()
    assert f"id          {session}" in lines
    assert "context     41,200 of 200,000 tokens (20.6%), $0.1200" in lines
    assert "recap       all done" in lines
    assert "turns       1 ended, 0 queued" in lines
    plan = lines.index("plan (1 of 3 done)")
    assert lines[plan + 1 : plan + 4] == ["  [x] Read", "  [>] Fix", "  [ ] Test"]
    files = lines.index("changed files (4, +15 -1)")
    assert lines[files + 1 : files + 7] == [
        "  M src/app.py  +4 -1",
        "  A new.py      +10 -0",
        "  A out.log     +1 -0  (shared with s7)",
        "  A b.txt       +0 -0  (shared with s2, s3, s4 +2)",
        "",
        "others' changes in the root: 1 file (not counted above)",
    ]
    tail = lines.index("transcript (last 2 of 2 lines)")
    assert lines[tail + 1 :] == ["  user    say all done", "  agent   all done"]
    info.status, info.queued_turns = m.SessionStatus.WORKING, 2
    code, out, _ = run(capsys, "show", session)
    assert "turns       1 ended, 1 running, 2 queued" in out.splitlines()
    # An agent that reports no tokens is not said to have used none.
    info.usage = m.SessionUsage(turns=2, busy_seconds=3.5)
    code, out, _ = run(capsys, "show", session)
    assert "usage       busy 3.5 s over 2 turns; no token counts from the agent" in out.splitlines()
    info.usage = m.SessionUsage(
        turns=2, input_tokens=1000, output_tokens=200, total_tokens=1200, busy_seconds=3.5
    )
    code, out, _ = run(capsys, "show", session)
    assert "usage       1,200 tokens over 2 turns (1,000 in, 200 out), busy 3.5 s" in out.splitlines()
    code, out, _ = run(capsys, "show", session, "--json", "--lines", "1")
    (shown,) = json_lines(out)
    assert shown["plan"]["done"] == 1
    assert shown["transcript"]["lines"] == [
        {"n": 1, "role": "agent", "turn": shown["transcript"]["lines"][0]["turn"], "text": "all done"}
    ]


def test_trace_prints_the_log_as_json_lines_and_exits(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    run(capsys, "send", session, "say a b")
    code, out, _ = run(capsys, "trace")
    events = json_lines(out)
    assert code == 0
    assert [e["seq"] for e in events] == list(range(1, fake.seq + 1))
    code, out, _ = run(capsys, "trace", "--kind", "turn.chunk", "--session", session, "--since", "1")
    assert [e["data"]["text"] for e in json_lines(out)] == ["a", " b"]
    code, out, err = run(capsys, "trace", "--run", "r-nope")
    assert (code, out) == (1, "")
    assert "no run 'r-nope'" in err


def test_runs_list_and_show_wall_beside_serial_time(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "runs")  # none yet: said on stderr, stdout has no rows
    assert (code, out) == (0, "")
    assert (
        err
        == "sessiond: no runs yet; `sessiond batch` makes one, as does a script that connects with run=NAME\n"
    )
    with connect(start=False, run="nightly") as daemon:
        daemon.agent().batch(["sleep 0.05", "sleep 0.05"], "/")
        assert daemon.run is not None
        run_id = daemon.run.id
    _, out, _ = run(capsys, "runs")
    header, row = out.splitlines()
    assert header.split() == ["ID", "OUTCOME", "SESSIONS", "TURNS", "WALL", "SERIAL", "STARTED", "NAME"]
    assert row.split()[:4] == [run_id, "completed", "2", "2"]
    assert row.endswith("nightly")
    _code, out, _ = run(capsys, "runs", run_id)
    pairs = dict(line.split(None, 1) for line in out.splitlines())
    assert pairs["outcome"] == "completed"
    assert pairs["time"].endswith(" s")
    assert "turns ran " in pairs["time"]
    _, out, _ = run(capsys, "runs", "--json")
    (listed,) = json_lines(out)
    assert listed["serialSeconds"] >= 0.1
    assert listed["wallSeconds"] > 0


def test_fleet(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    new_session(capsys)
    _code, out, _ = run(capsys, "fleet")
    assert out.splitlines()[0] == "fleet      0 working · 1 open"
    _, out, _ = run(capsys, "fleet", "--json")
    assert json_lines(out)[0]["open"] == 1


def write_prompts(home: Path, text: str) -> Path:
    path = home / "prompts.txt"
    path.write_text(text)
    return path


def test_batch_prints_answers_in_order_with_a_last_progress_line(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    prompts = write_prompts(home, 'sleep 0.2\nsay quick\n\n{"prompt": "say from json"}\n')
    code, out, err = run(capsys, "batch", "--root", "/", str(prompts))
    assert (code, out) == (0, "slept\nquick\nfrom json\n")
    assert err.startswith("[########################] 3/3  done 3 · failed 0 · stopped 0 · running 0")
    (run_info,) = fake.runs.values()
    ids = ", ".join(list(fake.sessions)[-3:])  # (opened in prompt order; the stand-in's ids in no run)
    assert err.endswith(
        f"sessiond: answered by {ids}; closed: `sessiond ls --all --run {run_info.id}` lists "
        "them by prompt; `sessiond reopen S` to ask one more\n"
    )
    assert (run_info.name, run_info.outcome) == ("batch prompts.txt", "completed")
    assert run_info.argv == sys.argv
    code, out, err = run(capsys, "batch", "--root", "/", "--max-concurrency", "1", "--json", str(prompts))
    answers = json_lines(out)
    assert [(a["index"], a["text"]) for a in answers] == [(0, "slept"), (1, "quick"), (2, "from json")]
    assert fake.most_active >= 1


def test_batch_failures_print_in_place_and_exit_1_unless_suppressed(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"say fine\nfail broke\n")))
    code, out, err = run(capsys, "batch", "--root", "/", "-")
    assert (code, out) == (1, "fine\nerror: broke\n")  # the answers that came are not thrown away
    assert err.endswith(
        "sessiond: prompt 2 of 2 failed: broke (1 of 2 failed, each in its place above); "
        "--suppress exits 0 when prompts fail\n"
        "sessiond: to run the 1 failed again: sessiond batch - --root / --only 2 "
        "(the same prompts on stdin)\n"
    )
    assert "answered by " in err
    assert [r.outcome for r in fake.runs.values()] == ["failed"]
    # The ones that failed are not said to have answered ("answered by s38…s51": s39 failed).
    prompts = write_prompts(home, "say fine\nfail broke\nsay fine\nsay fine\nfail broke\n")
    code, out, err = run(capsys, "batch", "--root", "/", "--suppress", str(prompts))
    assert (code, out) == (0, "fine\nerror: broke\nfine\nfine\nerror: broke\n")
    ids = [s.id for s in fake.sessions.values() if s.run == list(fake.runs)[-1]]  # (in prompt order)
    said = f"answered by {ids[0]}, {ids[2]}, {ids[3]}; failed: prompts 2, 5 ({ids[1]}, {ids[4]}); closed"
    assert f"sessiond: {said}" in err
    assert err.endswith(f"the 2 failed again: sessiond batch {prompts} --root / --suppress --only 2,5\n")
    # --only runs those: by their numbers in the file, as the notes above and --json name them.
    code, out, err = run(capsys, "batch", "--root", "/", "--suppress", "--only", "2,4-5", str(prompts))
    assert (code, out) == (0, "error: broke\nfine\nerror: broke\n")
    assert "failed: prompts 2, 5 (" in err
    assert err.endswith("--only 2,5\n")
    code, out, _ = run(capsys, "batch", "--root", "/", "--json", "--only", "3…4", str(prompts))
    assert [(a["index"], a["text"]) for a in json_lines(out)] == [(2, "fine"), (3, "fine")]
    assert number_spans([1, 2, 3, 4, 8]) == "2-5,9"
    # (a context of 0.5% is some: not "0%")
    assert [context_cell(u, 200_000, None, estimated=False) for u in (0, 1000, 3000)] == ["0%", "<1%", "2%"]
    for only, told in (
        ("6", "6 is not among the 5 prompts (1 to 5)"),
        ("3-2", "3-2 is not among the 5 prompts (1 to 5)"),
        ("two", "not prompt numbers; name them as 2-5,9 (counting from 1)"),
    ):
        code, _, err = run(capsys, "batch", "--only", only, str(prompts))
        assert (code, err) == (2, f"sessiond: --only {only}: {told}\n")
    assert id_spans(["s38", *(f"s{n}" for n in range(40, 52))]) == "s38, s40…s51"  # the daemon's ids
    assert id_spans(["s1", "s2", "s4", "s6", "s8", "s9", "s11"]) == "s1…s2, s4, s6, s8…s9 +1"
    prompts = write_prompts(home, "say fine\nfail broke\n")
    code, out, _ = run(capsys, "batch", "--root", "/", "--suppress", "--json", str(prompts))
    assert json_lines(out)[1] == {"index": 1, "prompt": "fail broke", "error": "broke", "code": -33005}
    code, _, err = run(capsys, "batch", str(write_prompts(home, "\n")))
    assert (code, err) == (2, f"sessiond: no prompts in {home / 'prompts.txt'}\n")
    code, _, err = run(capsys, "batch", str(write_prompts(home, '{"nope": 1}\n')))
    assert (code, err) == (
        2,
        f'sessiond: {home / "prompts.txt"} line 1: a JSON line must be an object with a "prompt" string\n',
    )


def test_merge_waits_prints_the_outcome_and_fails_with_the_conflicts(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    with connect(start=False) as daemon:
        good = daemon.agent().session("/", placement="worktree").id
        bad = daemon.agent().session("/", placement="worktree", title="conflict").id
        gated = daemon.agent().session("/", placement="worktree").id
    code, out, err = run(capsys, "merge", good, "--gate", "make test", "--keep")
    assert (code, out) == (
        0,
        f"merged {good} (sessiond/{good}-1) into main at c0ffee; worktree and branch kept\n",
    )
    assert err.splitlines()[0] == f"merge {good}: queued (position 1)"
    assert f"merge {good}: gate-passed (make test)" in err.splitlines()
    code, out, _ = run(capsys, "merge", bad, "--strategy", "rebase")
    assert code == 1
    assert out.splitlines()[1:] == ["conflicts:", "  app.py", "main and the working copy are as they were"]
    code, out, _ = run(capsys, "merge", gated, "--gate", "false", "--json")
    (entry,) = json_lines(out)
    assert (code, entry["status"], entry["gateOutput"]) == (1, "failed", "the gate said no")
    code, out, _ = run(capsys, "merge", "--queue")
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["SESSION", "STATUS", "POSITION"]
    assert [row.split()[:2] for row in rows] == [[good, "merged"], [bad, "failed"], [gated, "failed"]]
    code, _, err = run(capsys, "merge")
    assert (code, err) == (2, "sessiond: give the SESSION to merge, or --queue to show the merge queue\n")


def test_side_prints_the_answer_and_leaves_the_chat_open_unless_closed(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    code, out, err = run(capsys, "side", session, "say", "an", "answer")
    assert (code, out) == (0, "an answer\n")
    (side,) = [s.id for s in fake.sessions.values() if s.kind == "side"]
    assert err == (
        f"side chat {side} (forked from {session}); ask more with `sessiond send {side} ...`, "
        f"close it with `sessiond close {side}`\n"
    )
    assert fake.sessions[side].status is m.SessionStatus.IDLE
    code, out, _ = run(capsys, "side", session, "say", "bye", "--close", "--json")
    (shown,) = json_lines(out)
    assert (shown["forked"], shown["reply"]["text"], shown["session"]["status"]) == (True, "bye", "closed")


def test_tasks_listed_accepted_and_dismissed(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    session = new_session(capsys)
    with connect(start=False) as daemon:
        first = daemon.suggest_task("Fix the flaky test", "say fixed", from_session=session)
        second = daemon.suggest_task("Write docs", "say docs")
    code, out, _ = run(capsys, "tasks")
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "AGENT", "STATUS", "FROM", "SESSION", "TITLE"]
    assert [row.split()[:4] for row in rows] == [
        [second.id, "demo", "suggested", "-"],
        [first.id, "demo", "suggested", session],
    ]
    code, out, _ = run(capsys, "tasks", "accept", first.id)
    accepted = fake.tasks[first.id].session
    assert out == f"accepted {first.id} (running): Fix the flaky test; in session {accepted}\n"
    code, out, _ = run(capsys, "tasks", "dismiss", second.id, "--reason", "not now")
    assert out == f"dismissed {second.id}: not now\n"
    code, out, _ = run(capsys, "tasks", "--agent", "demo", "--json")
    listed = json_lines(out)
    assert (listed[0]["id"], listed[0]["status"]) == (second.id, "dismissed")
    code, out, err = run(capsys, "tasks", "accept", "k-nope")
    assert code == 1
    assert err == "sessiond: no task 'k-nope'; list tasks with `sessiond tasks`\n"


def test_tree_indents_side_chats_threads_and_suggested_tasks(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    _code, out, _ = run(capsys, "tree", session)
    assert out.splitlines()[1].split()[3] == "-"  # no tokens reported: none shown, not 0
    with connect(start=False) as daemon:
        main = daemon.session(session)
        side = main.side("say hi")
        thread = main.thread("say part")
        daemon.wait_threads([thread])
        task = daemon.suggest_task("Later", "say later", from_session=main)
    _code, out, _ = run(capsys, "tree", session)
    header, *rows = out.splitlines()
    assert header.split() == ["SESSION", "KIND", "STATUS", "TOKENS", "COST", "TITLE"]
    assert [row.split()[:3] for row in rows] == [
        [session, "main", "idle"],
        [task.id, "task", "suggested"],
        [side.id, "side", "idle"],
        [thread.id, "thread", "idle"],
    ]
    assert rows[2].startswith(f"  {side.id}")
    _, out, _ = run(capsys, "tree", session, "--json")
    assert len(json_lines(out)[0]["children"]) == 2


def test_watch_refuses_without_a_terminal(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "watch")
    assert (code, err) == (2, "sessiond: watch needs a terminal; for a log, use `sessiond trace --follow`\n")


# The quick commands (status, ls, agents, send, cancel, close) talk through `plain.py`: the
# same rules as the Python client when the daemon misbehaves.


def test_a_daemon_gone_mid_send_is_one_line(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    session = new_session(capsys)
    fake.close_on.add("session/prompt")
    code, out, err = run(capsys, "send", session, "say never")
    assert (code, out) == (1, "")
    assert err.startswith("sessiond: the daemon closed the connection [")


def test_a_malformed_answer_is_one_line(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    fake.garbage_on["daemon/status"] = b"Content-Length: 5\r\n\r\nnope!"
    code, out, err = run(capsys, "status")
    assert (code, out) == (1, "")
    assert err.startswith("sessiond: the daemon sent a malformed message: a body that is not JSON")


def test_send_answers_the_daemons_own_requests(fake: FakeDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    session = new_session(capsys)
    fake.ask_client = True
    code, out, _ = run(capsys, "send", session, "say ok")
    assert (code, out) == (0, "ok\n")
    created, unknown = fake.client_answers
    assert created["result"] is None
    assert unknown["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
