"""A closed session opened again (`session/reopen`), as it was: through the Python client (sync and
async), `sessiond reopen` and `sessiond watch`'s model, against a real daemon and the demo agent,
whose conversation is restored at its next turn (session/load); the same after a restart."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AgentNotFound, SessiondError, SessionNotFound, aconnect, connect
from sessiond.client.watch import WatchModel
from sessiond.protocol.models import EventKind, SessionStatus
from tests.client.worktrees import repository, session_with_work

pytestmark = pytest.mark.timeout(120)

SESSIOND = [sys.executable, "-m", "sessiond.client"]
FIRST = "plan read | write\nprogress 1 completed\nsay first"
FIRST_REMEMBERED = "1. plan read | write\\nprogress 1 completed\\nsay first"  # (the demo agent's `history`)


def sessiond(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SESSIOND, *args], env=daemon.env, capture_output=True, text=True, timeout=60)


def test_a_closed_session_reopens_as_it_was_and_its_agent_goes_on(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            session = client.agent("demo").session(tmp_path, title="notes")
            session.send(FIRST)
            watch = WatchModel()
            for opened in client.sessions():
                watch.add(opened.info)
            kinds = [EventKind.SESSION_CLOSED.value, EventKind.SESSION_REOPENED.value]
            with client.events(kinds=kinds) as stream:
                heard = iter(stream)
                session.close()
                watch.apply(next(heard))
                assert session.id not in watch.sessions  # closed: gone from the view

                refused = sessiond(daemon, "send", session.id, "say again")
                assert refused.returncode == 1
                assert f"reopen it with `sessiond reopen {session.id}`" in refused.stderr

                done = sessiond(daemon, "reopen", session.id)
                assert (done.returncode, done.stderr) == (0, "")
                assert done.stdout == (
                    f"{session.id} is open (idle); "
                    f"`sessiond send {session.id} ...` goes on where it left off\n"
                )
                event = next(heard)
            assert (event.kind, event.session) == (EventKind.SESSION_REOPENED, session.id)
            watch.apply(event)  # back in the view, as it was
            shown = watch.sessions[session.id]
            assert (shown.status, shown.turns, shown.title) == (SessionStatus.IDLE, 1, "notes")
            assert shown.plan is not None
            assert (shown.plan.done, shown.plan.total) == (1, 2)

            # Its agent restored the conversation (session/load): it remembers the first prompt.
            assert session.send("history").text == FIRST_REMEMBERED
            assert [line.text for line in session.transcript().lines][:2] == [
                "plan read | write",
                "progress 1 completed",
            ]
            assert session.reopen().status is SessionStatus.IDLE  # open already: left as it is
            assert client.fleet().open >= 1
            with pytest.raises(SessionNotFound, match="no session 'nope'"):
                client.session("nope").reopen()
            session.close()
        daemon.stop()
        daemon.start()  # a restart: a closed session loaded back reopens alike
        with connect(daemon.socket, start=False) as client:
            again = client.session(session.id).reopen()
            assert (again.status, again.turns) == (SessionStatus.IDLE, 2)
            assert client.session(session.id).send("history").text == f"{FIRST_REMEMBERED}\n2. history"
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


async def test_a_session_whose_agent_was_removed_cannot_reopen_and_says_what_to_do(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        async with aconnect(daemon.socket, start=False) as client:
            spare = await client.agent("spare", command=[sys.executable, "-m", "sessiond.daemon.demo_agent"])
            session = await spare.session(tmp_path)
            await session.asend("say hi")
            await spare.aremove()  # its sessions close with it
            with pytest.raises(AgentNotFound) as refused:
                await session.areopen()
            assert str(refused.value) == (
                f"session '{session.id}' cannot reopen: its agent 'spare' was removed; "
                "open a new one with session/open (`sessiond new`)"
            )
            assert (await session.aget()).status is SessionStatus.CLOSED  # left as it was
            said = await asyncio.to_thread(sessiond, daemon, "reopen", session.id)
            assert (said.returncode, said.stdout) == (1, "")
            assert said.stderr == (  # the daemon's way forward, not the command line's "list agents"
                f"sessiond: session '{session.id}' cannot reopen: its agent 'spare' was removed; "
                "open a new one with `sessiond new`\n"
            )
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_worktree_session_reopens_in_the_worktree_its_close_kept(tmp_path: Path) -> None:
    """Closed with uncommitted work, its worktree is kept; reopened, its next turn works there again."""
    repo = repository(tmp_path / "repo")
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            session, worktree = session_with_work(client, repo, "kept across the close")
            closed = session.close()
            assert closed.last_error is not None
            assert closed.last_error.startswith(f"worktree kept at {worktree}")
            assert session.reopen().last_error is None  # taken up again: no longer "kept"
            reply = session.send("read notes.txt")
            assert reply.text == "notes.txt has 1 line. First line: kept across the close"
            again = session.get().where
            assert again is not None
            assert again.worktree == worktree
            assert not (repo / "notes.txt").exists()  # still its own, not the checkout's
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_session_whose_last_turn_failed_reopens_failed_with_that_error(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            session = client.agent("demo").session(tmp_path)
            with pytest.raises(SessiondError, match="the tool broke"):
                session.send("fail the tool broke")
            session.close()
            again = session.reopen()
            assert again.status is SessionStatus.FAILED
            assert again.last_error is not None
            assert "the tool broke" in again.last_error
            assert session.send("say better").text == "better"
            assert session.get().last_error is None
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)
