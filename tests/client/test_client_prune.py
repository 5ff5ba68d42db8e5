"""Sessions closed before a time leave the store (`session/prune`), with their turns, events,
settled tasks and emptied runs: through the Python client and `sessiond prune`, against a real
daemon, its real SQLite store and the demo agent; what stays, stays, across a restart."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import Agent, SessionNotFound, aconnect, connect
from sessiond.daemon import serve
from sessiond.protocol.models import EventKind, SessionInfo, SessionStatus
from tests.client.worktrees import repository, session_with_work

pytestmark = pytest.mark.timeout(180)

SESSIOND = [sys.executable, "-m", "sessiond.client"]


def sessiond(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SESSIOND, *args],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def stored(daemon: Daemon, sql: str, *args: object) -> list[tuple[object, ...]]:
    """What the daemon's store holds, read beside it (WAL lets a reader in)."""
    conn = sqlite3.connect(daemon.home / "state" / "sessiond.db")
    try:
        return list(conn.execute(sql, args))
    finally:
        conn.close()


def answered_and_closed(agent: Agent, count: int, root: Path) -> None:
    """`count` sessions, each with a turn whose answer takes ~4 KB of the store, closed."""
    for session in agent.sessions(count, root):
        session.send("say " + "a long answer " * 300)
        session.close()


def on_an_older_store() -> Daemon:
    """A daemon started on a store as a sessiond made it before stores gave space back (made
    without auto_vacuum)."""
    daemon = Daemon()
    db = daemon.home / "state" / "sessiond.db"
    db.parent.mkdir(parents=True)
    made = sqlite3.connect(db)
    made.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    made.close()
    return daemon.start()


def test_sessions_closed_before_a_time_go_and_what_is_still_needed_stays(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            demo = client.agent("demo")
            parent = demo.session(tmp_path, title="has an open side chat")
            parent.send("say parent")
            side = parent.side("what did you say?")
            suggester = demo.session(tmp_path, title="suggested a task")
            suggester.send("say suggester")
            waiting = client.suggest_task("tidy", "say tidied", from_session=suggester.id)
            plain = [demo.session(tmp_path, title=f"old {n}") for n in range(3)]
            for session in plain:
                session.send("say old")
            done_task = client.suggest_task("done with", "say nothing", from_session=plain[0].id)
            client.dismiss_task(done_task.id, "not now")
            with connect(daemon.socket, start=False, run="nightly") as batch:
                in_run = batch.agent("demo").session(tmp_path, title="in a run")
                in_run.send("say run")
                in_run.close()
                run = batch.end_run()
            for session in (parent, suggester, *plain):
                session.close()
            # Its side chat went with it; opened again, it is a side chat open beside a closed parent.
            assert side.get().status is SessionStatus.CLOSED
            side.reopen()
            before = [e.seq for e in client.trace()]
            mark = datetime.now(UTC)
            late = demo.session(tmp_path, title="closed after the mark")
            late.send("say late")
            late.close()
            still_open = demo.session(tmp_path, title="open")
            turns_before = demo.get().turns
            assert client.status().closed == 7  # the six closed before the mark, and late

            counted = client.prune(mark, dry_run=True)
            assert counted.dry_run
            assert counted.freed_bytes == 0  # a dry run frees nothing
            assert (counted.sessions, counted.turns, counted.tasks, counted.runs) == (4, 4, 1, 1)
            assert counted.kept == 2  # the parent of an open side chat, where a waiting task was suggested
            assert counted.events > 4 * 4  # queued, started, chunks, ended, status... of each turn
            assert (
                client.session(plain[1].id).get().status is SessionStatus.CLOSED
            )  # a dry run removes nothing

            with client.events(kinds=[EventKind.SESSIONS_PRUNED.value]) as heard:
                pruned = client.prune(mark)
                told = next(iter(heard))
            done = {"dry_run", "freed_bytes"}
            assert pruned.model_dump(exclude=done) == counted.model_dump(exclude=done)
            assert not pruned.dry_run
            assert told.data == {"sessions": 4, "closedBefore": pytest.approx(mark.timestamp())}

            gone = {s.id for s in (*plain, in_run)}
            listed = {s.id for s in client.sessions(include_closed=True)}
            assert listed == {parent.id, side.id, suggester.id, late.id, still_open.id}
            for session_id in gone:
                with pytest.raises(SessionNotFound, match=f"no session '{session_id}'"):
                    client.session(session_id).get()
            replay = list(client.trace())
            assert not [e for e in replay if e.session in gone]
            assert [e for e in replay if e.session == parent.id]  # what stays keeps its events
            assert demo.get().turns == turns_before - 4  # the agent's count is of what is stored
            assert run.id not in {r.id for r in client.runs()}
            assert {t.id for t in client.tasks()} == {waiting.id}
            assert parent.transcript().lines  # kept whole
            assert stored(
                daemon, "SELECT COUNT(*) FROM turns WHERE session IN (?, ?)", *sorted(gone)[:2]
            ) == [(0,)]

            assert client.prune(mark).sessions == 0  # again: nothing left to remove
            assert client.status().closed == 3  # late, and the two kept
        daemon.stop()
        daemon.start()
        with connect(daemon.socket, start=False) as client:
            assert {s.id for s in client.sessions(include_closed=True)} == listed
            assert client.status().closed == 3  # (counted in the store at start)
            # The prune took the newest events with it: a seq is still never given out twice.
            fresh = client.agent("demo").session(tmp_path)
            fresh.send("say after")
            newest = [e.seq for e in client.trace() if e.session == fresh.id]
            assert min(newest) > max(before)
            assert client.session(parent.id).reopen().title == "has an open side chat"
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_sessiond_prune_asks_first_and_says_what_went(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            demo = client.agent("demo")
            sessions = [demo.session(tmp_path) for _ in range(2)]
            sessions[0].send("say one")
            for session in sessions:
                session.close()

        bad = sessiond(daemon, "prune", "last tuesday")
        assert bad.returncode == 2
        assert "'last tuesday' is neither an age nor a date; give an age such as 30d" in bad.stderr

        status = sessiond(daemon, "status").stdout
        assert "sessions  0 open (none); 2 closed\n" in status
        assert "; `sessiond prune 30d` removes the sessions closed over 30 days ago\n" in status

        nothing = sessiond(daemon, "prune", "1d")
        assert (nothing.returncode, nothing.stderr) == (0, "")
        assert nothing.stdout.startswith("no session closed before ")

        dry = sessiond(daemon, "prune", "0m", "--dry-run")
        assert (dry.returncode, dry.stderr) == (0, "")
        assert dry.stdout.startswith("would remove 2 sessions closed before ")
        assert "(1 turn, " in dry.stdout

        # Not at a terminal, it will not remove without --yes.
        unasked = sessiond(daemon, "prune", "0m")
        assert unasked.returncode == 2
        assert "this would remove 2 closed sessions and their transcripts; add --yes" in unasked.stderr

        done = sessiond(daemon, "prune", "0m", "--yes", "--json")
        assert (done.returncode, done.stderr) == (0, "")
        result = json.loads(done.stdout)
        assert (result["sessions"], result["turns"], result["dryRun"]) == (2, 1, False)
        assert stored(daemon, "SELECT COUNT(*) FROM sessions") == [(0,)]

        date = (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%d")  # a local date works too
        assert sessiond(daemon, "prune", date, "--yes").stdout.startswith("no session closed before ")
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_worktree_its_close_kept_is_named_and_left_in_place(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            session, worktree = session_with_work(client, repo, "work not merged")
            session.close()
        done = sessiond(daemon, "prune", "0m", "--yes")
        assert done.returncode == 0, done.stderr
        assert "what their closes kept stays where it is:" in done.stdout
        assert f"  worktree kept at {worktree} (branch " in done.stdout
        assert (Path(worktree) / "notes.txt").read_text() == "work not merged"
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_the_store_gives_back_the_space_a_prune_freed(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            demo = client.agent("demo")
            answered_and_closed(demo, 300, tmp_path)
            before = client.status().store_bytes
            pages_before = stored(daemon, "PRAGMA page_count")[0][0]
            pruned = client.prune(timedelta(0))
            assert pruned.sessions == 300
            page = stored(daemon, "PRAGMA page_size")[0][0]
            assert pruned.freed_bytes >= 1_000_000  # the turns' text alone was ~1.2 MB
            assert stored(daemon, "PRAGMA freelist_count") == [(0,)]  # every freed page went back
            # (A few pages the prune's own writes took before its space went back: its events, say.)
            assert stored(daemon, "PRAGMA page_count")[0][0] <= pages_before + 16 - pruned.freed_bytes // page
            # The file shrank (the log copied in), and the log was emptied.
            assert client.status().store_bytes <= before - pruned.freed_bytes // 2
            answered_and_closed(demo, 20, tmp_path)
        said = sessiond(daemon, "prune", "0m", "--yes")
        assert re.search(r"^the store's file gave back \d+ KiB$", said.stdout, re.M), said.stdout
        said = sessiond(daemon, "prune", "0m", "--yes")  # nothing left to free: nothing said of it
        assert "gave back" not in said.stdout
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_store_made_before_it_gave_space_back_keeps_its_size_until_compacted(tmp_path: Path) -> None:
    daemon = on_an_older_store()
    db = daemon.home / "state" / "sessiond.db"
    try:
        with connect(daemon.socket, start=False) as client:
            demo = client.agent("demo")
            kept = demo.session(tmp_path, title="kept")
            kept.send("say still here")
            answered_and_closed(demo, 100, tmp_path)
            pruned = client.prune(timedelta(0))
            assert (pruned.sessions, pruned.freed_bytes) == (100, 0)
        free = stored(daemon, "PRAGMA freelist_count")[0][0]
        page = stored(daemon, "PRAGMA page_size")[0][0]
        assert isinstance(free, int)
        assert isinstance(page, int)
        assert pruned.kept_bytes >= free * page - 16 * page  # (a few reused since by the daemon's writes)
        assert free * page > 1_100_000  # kept, for new rows to reuse; and said:
        said = sessiond(daemon, "prune", "0m", "--yes")
        assert re.search(
            r"^the store's file keeps \d+ MiB free inside it \(made by an older sessiond, it does not "
            r"give space back\): `sessiond stop`, then `sessiond compact`, gives it back$",
            said.stdout,
            re.M,
        ), said.stdout

        refused = sessiond(daemon, "compact")  # the daemon has the store open
        assert refused.returncode == 1
        assert f"serving on {daemon.socket}): stop it (`sessiond stop`), then compact" in refused.stderr, (
            refused.stderr
        )
        assert stored(daemon, "PRAGMA auto_vacuum") == [(0,)]  # not rewritten under the daemon

        daemon.stop()
        before = sum(part.stat().st_size for part in (db, Path(f"{db}-wal")) if part.exists())
        done = sessiond(daemon, "compact")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert re.fullmatch(
            rf"compacted the store {re.escape(str(db))}: from \d+ [KM]iB to \d+ KiB", lines[0]
        )
        assert lines[1:] == [
            "it was made before sessiond gave space back; from now on a prune gives back what it frees"
        ]
        assert db.stat().st_size <= before - free * page // 2
        assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
        assert stored(daemon, "PRAGMA auto_vacuum") == [(2,)]  # INCREMENTAL from now on

        daemon.start()  # what stayed, stayed
        with connect(daemon.socket, start=False) as client:
            assert client.session(kept.id).get().recap == "still here"
            answered_and_closed(client.agent("demo"), 1, tmp_path)
            pruned = client.prune(timedelta(0))
            assert pruned.freed_bytes > 0
            assert pruned.kept_bytes == 0
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_the_daemons_own_pass_on_an_older_store_says_what_it_keeps_and_how_to_give_it_back(
    tmp_path: Path,
) -> None:
    daemon = on_an_older_store()
    try:
        with connect(daemon.socket, start=False) as client:
            answered_and_closed(client.agent("demo"), 100, tmp_path)
        daemon.stop()
        keeping = Daemon(daemon.home, extra_args=("--keep-closed", "0s")).start()
        try:
            said = keeping.wait_for_line("(--keep-closed)")
            assert re.fullmatch(
                r"sessiond: removed 100 sessions closed over 0s ago \(--keep-closed\), with 100 turns and "
                r"[1-9]\d* events; the store's file keeps \d+ MiB free inside it \(made by an older "
                r"sessiond\): stop the daemon and run `sessiond compact` to give it back",
                said,
            ), said
        finally:
            keeping.stop()
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_compact_says_when_there_is_no_store_to_compact_or_it_is_not_one(tmp_path: Path) -> None:
    daemon = Daemon()  # never started: no store
    try:
        said = sessiond(daemon, "compact", "--store", str(tmp_path / "none.db"))
        assert said.returncode == 1
        assert (
            said.stderr == f"sessiond: there is no store at {tmp_path / 'none.db'}: nothing to compact "
            "(`sessiond serve` makes one there)\n"
        )
        assert not (tmp_path / "none.db").exists()  # not made by asking
        notes = tmp_path / "notes.txt"
        notes.write_text("not a store\n" * 1000)
        said = sessiond(daemon, "compact", "--store", str(notes))
        assert said.returncode == 1
        assert said.stderr.startswith(f"sessiond: the store {notes} is damaged"), said.stderr
        assert "Traceback" not in said.stderr
        assert notes.read_text() == "not a store\n" * 1000  # left as it was
    finally:
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_while_compact_holds_the_store_a_daemon_or_client_says_compact_has_it() -> None:
    daemon = Daemon().start()
    daemon.stop()  # its store stays; its lock is taken as `sessiond compact` takes it
    db = daemon.home / "state" / "sessiond.db"
    lock = serve._lock_store(db, daemon.socket, serve.COMPACTING)
    try:
        compacting = f"`sessiond compact` (pid {os.getpid()}) is compacting the store {db}"
        serving = sessiond(daemon, "serve")
        assert serving.returncode == 1
        assert f"{compacting}: wait for it to end, then try again" in serving.stderr, serving.stderr
        # A client that starts a daemon says so at once (no waiting out its start-up timeout).
        opening = sessiond(daemon, "new")
        assert opening.returncode != 0
        assert compacting in opening.stderr, opening.stderr
        again = sessiond(daemon, "compact")
        assert again.returncode == 1
        assert compacting in again.stderr, again.stderr
    finally:
        os.close(lock)
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_compact_is_refused_under_a_daemon_from_before_the_stores_lock() -> None:
    daemon = Daemon().start()
    daemon.stop()
    lock = serve._lock(daemon.socket)  # as such a daemon holds it: its socket's lock alone
    try:
        refused = sessiond(daemon, "compact")
        assert refused.returncode == 1
        assert refused.stderr == (
            f"sessiond: a daemon is already running on {daemon.socket} (pid {os.getpid()}); it has the "
            "store open: stop it (`sessiond stop`), then compact\n"
        )
    finally:
        os.close(lock)
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_one_daemon_to_a_store_whatever_its_socket(tmp_path: Path) -> None:
    """Two daemons on one store each numbered sessions and events of their own into its tables: the
    second's first session failed on a UNIQUE constraint."""
    daemon = Daemon().start()
    db = daemon.home / "state" / "sessiond.db"
    try:
        other = tmp_path / "other.sock"
        second = sessiond(daemon, "serve", "--socket", str(other))
        assert second.returncode == 1
        assert second.stderr == (
            f"sessiond: the store {db} is in use by the daemon serving on {daemon.socket} "
            f"(pid {daemon.pid}): one daemon to a store; use that one (`sessiond --socket "
            f"{daemon.socket} ...`), or serve another store (`sessiond serve --store PATH`)\n"
        )
        assert not other.exists()
        # Nor is the store compacted under it, from another socket either.
        refused = sessiond(daemon, "--socket", str(other), "compact")
        assert refused.returncode == 1
        assert (
            f"a daemon has the store {db} open (pid {daemon.pid}, serving on {daemon.socket}): stop it"
        ) in refused.stderr, refused.stderr
        with connect(daemon.socket, start=False) as client:  # the first serves on
            assert client.agent("demo").session(tmp_path).send("say still mine").text == "still mine"
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_prune_of_thousands_goes_in_chunks_while_the_daemon_serves(tmp_path: Path) -> None:
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            demo = client.agent("demo")
            closed = demo.sessions(1_200, tmp_path)
            for session in closed:
                session.close()
            mark = datetime.now(UTC)
            working = demo.session(tmp_path)
            assert working.send("say still here").text == "still here"
            pruned = client.prune(mark)
            assert (pruned.sessions, pruned.kept) == (1_200, 0)
            assert [s.id for s in client.sessions(include_closed=True)] == [working.id]
            assert working.send("say and after").text == "and after"
            assert client.fleet().open == 1
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_session_reopened_while_a_prune_runs_is_either_open_and_stored_or_gone(tmp_path: Path) -> None:
    """Whenever the reopen lands (before the choice, between chunks, after its chunk was queued),
    memory and the store agree: open in both, or gone from both with the reopen refused."""
    daemon = Daemon().start()

    async def race() -> tuple[str, SessionInfo | BaseException]:
        async with aconnect(daemon.socket, start=False) as client:
            demo = await client.agent("demo")
            sessions = await demo.sessions(1_500, tmp_path)
            for session in sessions:
                await session.aclose()
            mark = datetime.now(UTC)
            newest, oldest = sessions[-1], sessions[0]  # (pruned newest first: in the first chunk, the last)
            pruning = asyncio.ensure_future(client.prune(mark))
            while not pruning.done():  # until the first chunk is under way: the newest is gone
                try:
                    await newest.aget()
                except SessionNotFound:
                    break
            reopening = oldest.areopen()
            _, reopened = await asyncio.gather(pruning, reopening, return_exceptions=True)
            return oldest.id, reopened

    try:
        session_id, reopened = asyncio.run(race())
        daemon.stop()  # (everything it answered, stored)
        rows = stored(daemon, "SELECT status FROM sessions WHERE id = ?", session_id)
        daemon.start()
        with connect(daemon.socket, start=False) as client:
            if isinstance(reopened, BaseException):
                assert isinstance(reopened, SessionNotFound), reopened
                assert rows == []
                with pytest.raises(SessionNotFound):
                    client.session(session_id).get()
            else:
                assert reopened.status is not SessionStatus.CLOSED
                assert rows == [(reopened.status.value,)]
                assert client.session(session_id).get().status is reopened.status
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)


def test_a_daemon_told_to_keep_closed_sessions_for_a_while_removes_older_ones_itself(tmp_path: Path) -> None:
    first = Daemon().start()
    try:
        with connect(first.socket, start=False) as client:
            answered_and_closed(client.agent("demo"), 10, tmp_path)
            assert client.status().keep_closed is None
        first.stop()
        keeping = Daemon(first.home, extra_args=("--keep-closed", "0s")).start()  # (0s: every one)
        try:
            said = keeping.wait_for_line("(--keep-closed)")
            assert re.fullmatch(
                r"sessiond: removed 10 sessions closed over 0s ago \(--keep-closed\), "
                r"with 10 turns and [1-9]\d* events; the store's file gave back \d+ KiB",
                said,
            ), said
            with connect(keeping.socket, start=False) as client:
                status = client.status()
                assert (status.closed, status.keep_closed) == (0, 0.0)
            shown = sessiond(keeping, "status").stdout
            assert "; a closed session goes 0s after its close (--keep-closed)\n" in shown
        finally:
            keeping.stop()
        refused = subprocess.run(
            [sys.executable, "-m", "sessiond.daemon", "--socket", str(first.socket), "--keep-closed", "soon"],
            env=first.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 1
        assert refused.stderr == (
            "sessiond: --keep-closed 'soon': expected an age such as 30d, 12h or 2w (0s keeps none)\n"
        )
    finally:
        first.stop()
        shutil.rmtree(first.home, ignore_errors=True)
