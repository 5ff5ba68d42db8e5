"""The `sessiond` command against the fake daemon (it stands in for sessiond)."""

from __future__ import annotations

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

from sessiond.client.cli import main, relay
from sessiond.protocol import paths

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
    assert "sessions  0 open (none)" in lines
    code, out, _ = run(capsys, "status", "--json")
    (status,) = json_lines(out)
    assert status["socket"] == str(paths.socket_path())
    assert status["version"] == "fake"


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
    assert header.split() == ["ID", "AGENT", "STATUS", "TURNS", "ROOT", "RECAP"]
    assert [row.split()[0] for row in rows] == [first, opened[0]["id"], opened[1]["id"]]
    assert rows[0].split()[1:] == ["demo", "idle", "0", str(home), "first"]
    assert header.index("STATUS") == rows[0].index("idle")  # aligned

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
    assert out.splitlines()[0].split() == ["NAME", "PROCESS", "SESSIONS", "TURNS", "COMMAND"]
    assert out.splitlines()[1].split() == ["demo", "stopped", "0", "0", "demo"]
    code, out, _ = run(capsys, "agents", "--json")
    assert code == 0
    assert [a["name"] for a in json_lines(out)] == ["demo"]


def new_session(capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run(capsys, "new", "--root", "/")
    assert code == 0
    return out.strip()


def test_send_streams_the_reply_and_reports_the_stop_reason(
    fake: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    session = new_session(capsys)
    code, out, err = run(capsys, "send", session, "say", "hello", "world")
    assert (code, out, err) == (0, "hello world\n", "stop reason: end_turn\n")
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
