"""What an agent asks permission for, answered from the command line: `sessiond permissions`,
`allow`, `reject`, `send` asking the person at its terminal, and `sessiond watch`'s keys. A real
daemon and the demo agent (`ask TEXT` asks, offering Allow and Reject); terminals are tmux."""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import Daemon as Client
from sessiond.client import connect
from sessiond.client.cli import _answer_to
from tests.terminal import Tmux, bottom, row_of

pytestmark = pytest.mark.timeout(120)

SESSIOND = [sys.executable, "-m", "sessiond.client"]
ASKING = "say looking\nask delete the cache?\nsay after"


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    running.stop()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with connect(daemon.socket, start=False) as connected:
        yield connected


def sessiond(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SESSIOND, *args], env=daemon.env, capture_output=True, text=True, timeout=60)


def sending(daemon: Daemon, session: str, prompt: str) -> subprocess.Popen[str]:
    """`sessiond send` as a script runs it: no terminal."""
    return subprocess.Popen(
        [*SESSIOND, "send", session, prompt],
        env=daemon.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def asking(daemon: Daemon, client: Client, session: str) -> tuple[subprocess.Popen[str], str]:
    """A script's `sessiond send` of ASKING, once its agent asks: the command, the permission id."""
    with client.events(sessions=[session], kinds=["permission.asked"]) as events:
        turn = sending(daemon, session, ASKING)
        asked = next(iter(events))
    return turn, str(asked.data["permission"])


@contextlib.contextmanager
def asked_at_a_terminal(daemon: Daemon, session: str) -> Iterator[Tmux]:
    """`sessiond send` of ASKING in a terminal, once it asks the person; `EXIT=N` follows it."""
    command = shlex.join([*SESSIOND, "send", session, ASKING])
    tmux = Tmux(["sh", "-c", f"{command}; echo EXIT=$?; sleep 60"], daemon.env)
    try:
        tmux.wait_for(lambda s: "(Enter: answer elsewhere) >" in s)
        yield tmux
    finally:
        tmux.kill()


def to_its_end(tmux: Tmux) -> list[str]:
    """The terminal's lines once the command has exited, blank ones left out."""
    screen = tmux.wait_for(lambda s: "EXIT=" in s)
    return [line for line in screen.splitlines() if line.strip()]


def test_a_script_is_told_how_to_answer_and_another_command_answers(
    daemon: Daemon, client: Client, tmp_path: Path
) -> None:
    session, other = client.agent("demo").sessions(2, tmp_path)
    turn, permission = asking(daemon, client, session.id)

    listed = sessiond(daemon, "permissions")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["PERMISSION", "SESSION", "AGENT", "ASKS", "OPTIONS"]
    assert row.split()[:3] == [permission, session.id, "demo"]
    assert "[other] delete the cache?" in row
    assert "Allow (allow_once), Reject (reject_once)" in row
    as_json = json.loads(sessiond(daemon, "permissions", session.id, "--json").stdout)
    assert (as_json["permission"], as_json["session"]) == (permission, session.id)
    assert [o["optionId"] for o in as_json["options"]] == ["allow_once", "reject_once"]
    quiet = sessiond(daemon, "permissions", other.id)
    assert (quiet.returncode, quiet.stdout) == (0, "")
    assert quiet.stderr == f"no agent waits for a permission in {other.id}\n"
    shown = sessiond(daemon, "show", session.id).stdout
    assert f"asks        [other] delete the cache? ({permission}: sessiond allow or reject it)" in shown

    # Wrong answers change nothing: the request still waits.
    always = sessiond(daemon, "allow", session.id, "--always")
    assert always.returncode == 1
    assert always.stderr == (
        f"sessiond: the agent offers no allow_always answer to {permission} ([other] delete the cache?): "
        "it offers Allow (allow_once), Reject (reject_once)\n"
    )
    nobody = sessiond(daemon, "reject", other.id)
    assert nobody.returncode == 1
    assert nobody.stderr.startswith(f"sessiond: no permission request waits under '{other.id}'")
    unknown = sessiond(daemon, "permissions", "s-nope")
    assert unknown.returncode == 1
    assert unknown.stderr == "sessiond: no session 's-nope'; list sessions with `sessiond ls --all`\n"
    assert [p.permission for p in client.permissions()] == [permission]

    rejected = sessiond(daemon, "reject", permission)
    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout == f"{session.id}: Reject: [other] delete the cache? ({permission})\n"
    out, err = turn.communicate(timeout=60)
    assert turn.returncode == 0, err
    assert out == 'looking\n\nAsked "delete the cache?": Reject\nafter\n'
    assert err.splitlines() == [
        "sessiond: [other] delete the cache?: the agent asks permission",
        f"sessiond: the turn waits for an answer: sessiond allow {session.id} (or reject), "
        "from `sessiond watch` or an editor",
        "sessiond: answered elsewhere: Reject",
    ]
    assert client.permissions() == []
    gone = sessiond(daemon, "allow", permission)
    assert gone.returncode == 1
    assert "answered already, or its turn ended?" in gone.stderr


def test_allow_by_session_picks_that_sessions_question(
    daemon: Daemon, client: Client, tmp_path: Path
) -> None:
    first, second = client.agent("demo").sessions(2, tmp_path)
    turns = []
    for session in (first, second):
        turns.append(asking(daemon, client, session.id)[0])
    assert sessiond(daemon, "allow", second.id, "--json").returncode == 0
    out, _ = turns[1].communicate(timeout=60)
    assert 'Asked "delete the cache?": Allow' in out
    assert [p.session for p in client.permissions()] == [first.id]  # the other one still waits
    assert sessiond(daemon, "reject", first.id).returncode == 0
    out, _ = turns[0].communicate(timeout=60)
    assert 'Asked "delete the cache?": Reject' in out


def test_send_says_when_its_prompt_waits_behind_the_sessions_other_turns(
    daemon: Daemon, client: Client, tmp_path: Path
) -> None:
    session = client.agent("demo").session(tmp_path).id
    first, permission = asking(daemon, client, session)
    second = sending(daemon, session, "say queued after")
    assert second.stderr is not None
    told = second.stderr.readline()  # at once, while the first turn still waits
    assert told == (
        f"sessiond: {session} is busy (a turn waits for a permission answer: `sessiond permissions`): "
        f"this prompt waits its turn; `sessiond cancel {session}` stops every turn of it\n"
    )
    assert client.answer_permission(permission, "allow_once")
    out, _ = first.communicate(timeout=60)
    assert out.endswith("after\n")
    out, err = second.communicate(timeout=60)
    assert (second.returncode, out) == (0, "queued after\n"), err
    free = sending(daemon, session, "say free")  # nothing ahead of it: nothing said of it
    out, err = free.communicate(timeout=60)
    assert (out, err) == ("free\n", "")


def test_a_batch_says_when_its_turns_wait_on_a_question(daemon: Daemon, client: Client) -> None:
    batch = subprocess.Popen(
        [*SESSIOND, "batch", "-"],
        env=daemon.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert batch.stdin is not None
    assert batch.stderr is not None
    batch.stdin.write("say plain\n" + json.dumps({"prompt": ASKING}) + "\n")
    batch.stdin.close()
    told = batch.stderr.readline()  # the hint comes as the agent asks, before the batch ends
    assert told == (
        "sessiond: an agent asks permission and its turn waits: see `sessiond permissions`, "
        "answer with `sessiond allow SESSION` (or reject)\n"
    )
    (asked,) = client.permissions()
    assert sessiond(daemon, "allow", asked.session).returncode == 0
    assert batch.stdout is not None
    out, err = batch.stdout.read(), batch.stderr.read()  # to their end: the batch has exited
    assert batch.wait(60) == 0, err
    assert out == 'plain\nlooking\n\nAsked "delete the cache?": Allow\nafter\n'
    assert "done 2 · failed 0" in err


def test_a_session_waiting_on_two_requests_is_answered_by_their_ids() -> None:
    options = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}]
    waiting = [
        {"permission": f"p-{n}", "session": "s1", "toolCall": {"title": f"step {n}"}, "options": options}
        for n in (1, 2)
    ]
    with pytest.raises(LookupError, match=r"^s1 waits on 2 permission requests \(p-1: \[tool\] step 1; p-2"):
        _answer_to(waiting, "s1", "allow_once")
    asked, option = _answer_to(waiting, "p-2", "allow_once")
    assert (asked["permission"], option["optionId"]) == ("p-2", "yes")


def test_send_at_a_terminal_asks_the_person_there(daemon: Daemon, client: Client, tmp_path: Path) -> None:
    session = client.agent("demo").session(tmp_path).id
    # (At a terminal each tool call, once done, is said on stderr: here the question's own.)
    ended = ["· [other] delete the cache?", 'Asked "delete the cache?": Allow', "after", "EXIT=0"]
    with asked_at_a_terminal(daemon, session) as tmux:
        tmux.keys("7", "Enter")  # not an option: asked again
        tmux.wait_for(lambda s: "type a number from 1 to 2, or just Enter" in s)
        tmux.keys("1", "Enter")
        lines = to_its_end(tmux)
        assert lines[0] == "looking"
        assert lines[1] == "sessiond: [other] delete the cache?: the agent asks permission"
        assert lines[-6:] == [
            "  1) Allow  2) Reject  (Enter: answer elsewhere) > 1",
            "sessiond: answered: Allow",
            *ended,
        ]

    # Enter leaves it to another client; the answer given there is said here.
    with asked_at_a_terminal(daemon, session) as tmux:
        tmux.keys("Enter")
        tmux.wait_for(lambda s: f"the turn waits for an answer: sessiond allow {session}" in s)
        assert sessiond(daemon, "reject", session).returncode == 0
        lines = to_its_end(tmux)
        assert "sessiond: answered elsewhere: Reject" in lines
        assert "· [other] delete the cache? (refused)" in lines
        assert 'Asked "delete the cache?": Reject' in lines
        assert lines[-1] == "EXIT=0"

    # Answered elsewhere while the person is being asked: the question closes at once, the turn
    # goes on, nothing typed.
    with asked_at_a_terminal(daemon, session) as tmux:
        assert sessiond(daemon, "allow", session).returncode == 0
        assert to_its_end(tmux)[-6:] == [
            "  1) Allow  2) Reject  (Enter: answer elsewhere) >",
            "sessiond: answered elsewhere: Allow",
            *ended,
        ]


def test_watch_answers_what_the_selected_sessions_agent_asks(
    daemon: Daemon, client: Client, tmp_path: Path
) -> None:
    quiet, early, late = client.agent("demo").sessions(3, tmp_path)
    asked_before, _ = asking(daemon, client, early.id)
    # Asked before the view started: read with permission/list.
    tmux = Tmux([*SESSIOND, "watch"], daemon.env)
    try:
        screen = tmux.wait_for(lambda s: "asks: [other] delete the cache?" in s)
        assert row_of(screen, quiet.id).startswith(">")
        tmux.keys("a")  # the selected session asks nothing
        tmux.wait_for(lambda s: bottom(s) == f"{quiet.id} asks nothing now")
        tmux.keys("j")
        tmux.wait_for(
            lambda s: bottom(s) == f"{early.id} asks (a allow · r reject): [other] delete the cache?"
        )
        tmux.keys("A")  # not offered: nothing is answered
        tmux.wait_for(lambda s: "the agent offers no allow_always answer here" in s)
        assert [p.session for p in client.permissions()] == [early.id]
        tmux.keys("a")
        out, _ = asked_before.communicate(timeout=60)
        assert 'Asked "delete the cache?": Allow' in out
        tmux.wait_for(lambda s: row_of(s, early.id).rstrip().endswith("after"))

        # Asked while the view runs: known from its event.
        turn = sending(daemon, late.id, ASKING)
        tmux.wait_for(lambda s: "asks: [other] delete the cache?" in row_of(s, late.id))
        tmux.keys("j", "Enter")  # opened, its question is in its view and at the bottom
        screen = tmux.wait_for(lambda s: "asks        [other] delete the cache?" in s)
        assert bottom(screen) == f"{late.id} asks (a allow · r reject): [other] delete the cache?"
        tmux.keys("r")
        out, _ = turn.communicate(timeout=60)
        assert 'Asked "delete the cache?": Reject' in out
        tmux.wait_for(lambda s: bottom(s) == f"{late.id}: Reject: [other] delete the cache?")
        assert client.permissions() == []
    finally:
        tmux.kill()


def test_a_permission_request_names_a_path_under_the_root_as_the_transcript_does(
    daemon: Daemon, client: Client, tmp_path: Path
) -> None:
    """The agent's title names the whole path; the person reads it relative to the session's root,
    in the request and in the transcript's line for the call alike."""
    session = client.agent("demo").session(tmp_path)
    with client.events(sessions=[session.id], kinds=["permission.asked"]) as events:
        turn = sending(daemon, session.id, f"ask delete {tmp_path}/cache?")
        asked = next(iter(events))
    assert asked.data["toolCall"]["title"] == "delete cache?"
    (waiting,) = client.permissions(session.id)
    assert waiting.tool_call["title"] == "delete cache?"
    client.answer_permission(waiting.permission, "allow_once")
    assert turn.wait(60) == 0
    assert "[other] delete cache?" in [line.text for line in session.transcript().lines]
