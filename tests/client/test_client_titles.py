"""A session its client opened without a title is named by its first prompt, and renamed by its agent
(ACP's `session_info_update`: the demo agent's `title TEXT`); one its client named keeps that name.
A real daemon and the demo agent, read through the Python client, `sessiond ls` and `sessiond
watch`'s model fed by the daemon's events; the names survive a restart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import connect
from sessiond.client.watch import WatchModel
from sessiond.daemon import titles
from sessiond.protocol.models import EventKind

pytestmark = pytest.mark.timeout(120)

SESSIOND = [sys.executable, "-m", "sessiond.client"]
FIRST = (
    "plan read the parser | fix the off-by-one in the tokenizer | run the whole test suite again\nsay done"
)


def sessiond(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SESSIOND, *args], env=daemon.env, capture_output=True, text=True, timeout=60)


def listed(daemon: Daemon) -> dict[str, str]:
    """`sessiond ls --json` (a session a line): each session's title by id."""
    done = subprocess.run(
        [*SESSIOND, "ls", "--json"], env=daemon.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return {row["id"]: row["title"] for row in map(json.loads, done.stdout.splitlines())}


def test_titles_from_the_first_prompt_and_the_agent(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            demo = client.agent("demo")
            untitled, named, blank = (
                demo.session(tmp_path),
                demo.session(tmp_path, title="  mine\n"),  # (the spaces around it are no part of it)
                demo.session(tmp_path, title="  "),  # a blank title is none
            )
            assert named.get().title == "mine"
            with client.events(kinds=[EventKind.SESSION_TITLED.value]) as events:
                untitled.send(FIRST)
                named.send(FIRST)
                blank.send("say nothing to name it by\n")
                heard = next(iter(events))
            want = "plan read the parser | fix the off-by-one in the tokenizer…"
            assert (heard.session, heard.data) == (untitled.id, {"title": want})
            assert len(want) <= titles.MOST
            # A later prompt leaves the first one's name; the client's own name stays.
            untitled.send("say again")
            assert listed(daemon) == {
                untitled.id: want,
                named.id: "mine",
                blank.id: "say nothing to name it by",
            }

            # The agent names the session: over the first prompt's name, never over the client's.
            untitled.send("title Fix the tokenizer's off-by-one\nsay renamed")
            named.send("title Not yours to name\nsay kept")
            assert client.session(untitled.id).info.title == "Fix the tokenizer's off-by-one"
            assert client.session(named.id).info.title == "mine"

            # A person renames one the agent named (`sessiond rename`): the agent names it no more.
            renamed = sessiond(daemon, "rename", untitled.id, "Tokenizer", "fix")
            assert (renamed.returncode, renamed.stdout) == (0, f"{untitled.id}: Tokenizer fix\n"), (
                renamed.stderr
            )
            untitled.send("title The agent's name again\nsay ok")
            assert untitled.get().title == "Tokenizer fix"

            # What a watching client hears, applied to its model as `sessiond watch` applies it.
            model = WatchModel()
            for session in client.sessions():
                model.add(session.info)
            with client.events(kinds=[EventKind.SESSION_TITLED.value]) as events:
                blank.send("title  Say\tnothing,  renamed \nsay ok")
                event = next(iter(events))
            model.apply(event)
            assert model.sessions[blank.id].title == "Say nothing, renamed"
    finally:
        daemon.stop()

    # Where each name came from is stored: after a restart the agent may still rename the first
    # prompt's and its own, not the client's.
    again = Daemon(daemon.home).start()
    try:
        assert listed(again) == {
            untitled.id: "Tokenizer fix",
            named.id: "mine",
            blank.id: "Say nothing, renamed",
        }
        with connect(again.socket, start=False) as client:
            client.session(blank.id).send("title Renamed after the restart")
            client.session(untitled.id).send("title Not after a person named it")
            client.session(named.id).send("title Still not yours")
        assert listed(again) == {
            untitled.id: "Tokenizer fix",
            named.id: "mine",
            blank.id: "Renamed after the restart",
        }
    finally:
        again.stop()


def test_sessions_opened_together_under_one_title_are_numbered(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        done = sessiond(daemon, "new", "-n", "3", "--title", " review ", "--root", str(tmp_path))
        assert done.returncode == 0, done.stderr
        ids = done.stdout.split()
        one = sessiond(daemon, "new", "--title", "alone", "--root", str(tmp_path))
        assert listed(daemon) == {
            ids[0]: "review (1 of 3)",
            ids[1]: "review (2 of 3)",
            ids[2]: "review (3 of 3)",
            one.stdout.strip(): "alone",
        }
    finally:
        daemon.stop()


def test_side_chats_are_named_by_their_question_and_listed_as_whose(tmp_path: Path) -> None:
    """Two side chats of one session read apart (both were "side of s1"), in `sessiond ls` as a
    side chat of their session; one opened without a question is named by its first prompt."""
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            main = client.agent("demo").session(tmp_path)
            main.send("say the main work")
        why = sessiond(daemon, "side", main.id, "why", "does", "the", "test", "flake?")
        assert why.returncode == 0, why.stderr
        how = sessiond(daemon, "side", main.id, "how is it built?")
        assert how.returncode == 0, how.stderr
        with connect(daemon.socket, start=False) as client:
            quiet = client.session(main.id).side()  # no question yet
            assert quiet.info.title is None
            quiet.send("say what is left")
        titles_by_id = listed(daemon)
        sides = sorted((sid, title) for sid, title in titles_by_id.items() if sid != main.id)
        assert [title for _, title in sides] == [
            "why does the test flake?",
            "how is it built?",
            "say what is left",
        ]
        shown = sessiond(daemon, "ls")
        assert shown.returncode == 0, shown.stderr
        rows = {line.split()[0]: line for line in shown.stdout.splitlines()[1:]}
        assert f"side of {main.id}: why does the test flake?" in rows[sides[0][0]], shown.stdout
        assert f"side of {main.id}: how is it built?" in rows[sides[1][0]], shown.stdout
        assert "side of" not in rows[main.id], shown.stdout
    finally:
        daemon.stop()


def test_a_rename_to_blanks_or_of_no_session_says_what_and_changes_nothing(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            session = client.agent("demo").session(tmp_path, title="kept")
        for title in (" ", ""):
            blank = sessiond(daemon, "rename", session.id, title)
            assert blank.returncode != 0
            assert "title: it is blank; give the session a name with words in it" in blank.stderr
        nobody = sessiond(daemon, "rename", "s99", "a name")
        assert nobody.returncode != 0
        assert "no session 's99'" in nobody.stderr
        assert listed(daemon) == {session.id: "kept"}
    finally:
        daemon.stop()


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("fix the bug", "fix the bug"),
        ("\n\n   \n  fix   the\tbug  \nand more", "fix the bug"),
        ("x" * 80, "x" * 59 + "…"),
        ("word " * 20, "word word word word word word word word word word word…"),
        (" \n\t\n", None),
    ],
)
def test_a_title_is_the_first_line_with_words_cut_at_a_word(prompt: str, title: str | None) -> None:
    assert titles.shortened(prompt) == title
