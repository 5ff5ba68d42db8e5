"""When the store says no, the daemon says so truthfully, keeps memory as it was, and carries on.

A locked store (another process holding `BEGIN EXCLUSIVE`), a full disk (a real small
tmpfs), a damaged store file and a read-only state dir, each through a real daemon process
and the real CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, SessiondError, aconnect
from sessiond.daemon import store as st
from sessiond.daemon.store import Store, StoreUnavailable

TIMEOUT = 60.0
SESSIOND = str(Path(sys.executable).parent / "sessiond")


@pytest.fixture
def home() -> Iterator[Path]:
    # Short, under /tmp: a unix socket path must stay under 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def stop(daemon: Daemon) -> None:
    code = daemon.stop()
    print("\n".join(["--- daemon stderr", *daemon.stderr]))
    assert code == 0, f"the daemon exited with {code}"


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def open_ids(client: AsyncDaemon) -> list[str]:
    return [s.id for s in await client.sessions(include_closed=True)]


# ---------------------------------------------------------------- a locked store


async def test_a_locked_store_refuses_writes_truthfully_and_memory_stays_as_it_was(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SESSIOND_BUSY_TIMEOUT", "0.5")
    daemon = Daemon(home).start()
    db = home / "state" / "sessiond.db"
    holder: sqlite3.Connection | None = None
    try:
        async with aconnect(daemon.socket, start=False) as client:
            agent = await client.agent("demo")
            kept = await agent.session(tmp_path, title="kept")
            await kept.asend("say before the lock")

            holder = sqlite3.connect(db, isolation_level=None, timeout=TIMEOUT)
            holder.execute("BEGIN EXCLUSIVE")

            began = time.monotonic()
            with pytest.raises(SessiondError) as refused:
                await asyncio.wait_for(agent.sessions(3, tmp_path), TIMEOUT)
            message = str(refused.value)
            assert f"the store {db} is locked by another process" in message
            assert "nothing was changed" in message
            assert time.monotonic() - began < 30  # a busy timeout, not one per write
            assert await open_ids(client) == [kept.id]  # nothing half-applied
            assert (await agent.aget()).open_sessions == 1

            with pytest.raises(SessiondError, match="is locked by another process"):
                await client.agent("other", command=[sys.executable, "-c", "pass"])
            assert [a.name for a in await client.agents()] == ["demo"]

            with pytest.raises(SessiondError, match="is locked by another process"):
                await kept.aclose()
            assert (await kept.aget()).status == "idle"  # still open

            # Let go: the daemon carries on, and the next requests work.
            holder.execute("ROLLBACK")
            holder.close()
            holder = None
            (after,) = await agent.sessions(1, tmp_path, title="after")
            assert after.id == "s2"  # the refused ones took no ids
            assert (await kept.aclose()).status == "closed"
            assert (await kept.aget()).status == "closed"
        stop(daemon)

        # What was answered is what is stored.
        daemon.start()
        async with aconnect(daemon.socket, start=False) as client:
            sessions = {s.id: s.info for s in await client.sessions(include_closed=True)}
            assert sorted(sessions) == ["s1", "s2"]
            assert sessions["s1"].status == "closed"
            assert sessions["s1"].turns == 1
            assert sessions["s2"].title == "after"
            assert [a.name for a in await client.agents()] == ["demo"]
        stop(daemon)
    finally:
        if holder is not None:
            holder.close()
        if daemon.process is not None and daemon.process.poll() is None:
            daemon.stop(signal.SIGKILL)


async def test_the_store_keeps_unwaited_writes_through_a_lock_and_fails_waited_ones_whole(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    store = Store(db, busy_timeout=0.2)
    store.start()
    holder = sqlite3.connect(db, isolation_level=None, timeout=TIMEOUT)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store.write(st.execute("INSERT INTO meta VALUES ('unwaited', '1')"), wait=False)
        waited = store.write(st.execute("INSERT INTO meta VALUES ('waited', '1')"))
        assert waited is not None
        with pytest.raises(StoreUnavailable, match=f"the store {db} is locked by another process"):
            await asyncio.wait_for(waited, TIMEOUT)
        assert store.trouble is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    def keys() -> set[str]:
        reader = sqlite3.connect(db)
        try:
            return {key for (key,) in reader.execute("SELECT key FROM meta")}
        finally:
            reader.close()

    # Retried on its own once the lock is gone: polled (off the loop), within a generous timeout.
    assert await asyncio.to_thread(eventually, lambda: "unwaited" in keys())
    assert "waited" not in keys()  # refused means refused: it is not written later behind its caller
    assert store.trouble is None
    await store.flush()
    assert await store.close() == 0


# ---------------------------------------------------------------- a full disk


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=60)


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[None]:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = _mount("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=60)


def fill(path: Path) -> None:
    """Write `path` until the disk it is on has not one byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
        with pytest.raises(OSError, match="No space left") as full:
            os.write(fd, b"\0")
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


async def test_a_full_disk_is_told_within_the_timeout_and_the_daemon_carries_on(
    home: Path, tmp_path: Path
) -> None:
    state = home / "state"
    with small_tmpfs(state, "4m"):
        daemon = Daemon(home).start()
        db = state / "sessiond.db"
        try:
            async with aconnect(daemon.socket, start=False) as client:
                agent = await client.agent("demo")
                first = await agent.session(tmp_path, title="before")
                await first.asend("say acknowledged before the disk filled")

                fill(state / "filler")
                with pytest.raises(SessiondError) as refused:
                    # Many rows (~2 MB): more than any space left inside the files SQLite already
                    # has (a WAL checkpointed and reset keeps its size, and takes writes into it).
                    await asyncio.wait_for(agent.sessions(5000, tmp_path), TIMEOUT)
                message = str(refused.value)
                assert f"the disk holding the store {db} is full" in message
                assert "free some space" in message
                assert await open_ids(client) == [first.id]
                # Other requests are answered too, and reads work.
                assert (await client.status()).sessions
                assert (await first.aget()).turns == 1
                # A turn is answered (its rows and events wait in memory for the disk).
                with contextlib.suppress(SessiondError):
                    await asyncio.wait_for(first.asend("say while the disk is full"), TIMEOUT)
                assert (await first.aget()).turns == 2

                (state / "filler").unlink()
                (after,) = await asyncio.wait_for(agent.sessions(1, tmp_path, title="after"), TIMEOUT)
                assert after.id == "s2"
                reply = await asyncio.wait_for(after.asend("say space is back"), TIMEOUT)
                assert reply.text == "space is back"
            stop(daemon)

            daemon.start()
            async with aconnect(daemon.socket, start=False) as client:
                sessions = {s.id: s.info for s in await client.sessions()}
                assert sorted(sessions) == ["s1", "s2"]
                assert sessions["s1"].turns == 2  # the turn run while the disk was full, stored since
                assert sessions["s2"].turns == 1
            stop(daemon)
        finally:
            if daemon.process is not None and daemon.process.poll() is None:
                daemon.stop(signal.SIGKILL)


# ---------------------------------------------------------------- start-up: the real CLI


def serve(home: Path, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """`sessiond serve`, expected to refuse to start."""
    return subprocess.run(
        [SESSIOND, "serve", "--socket", str(home / "run" / "s.sock"), *args],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_damaged_store_is_named_with_what_to_do_and_another_store_can_be_served(home: Path) -> None:
    db = home / "state" / "sessiond.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is no SQLite database, just bytes where one should be\n" * 200)
    refused = serve(home)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"sessiond: the store {db} is damaged"), refused.stderr
    assert f"mv {db} {db}.broken" in refused.stderr
    assert "sessiond serve --store PATH" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    # `--store` serves another file, and leaves the damaged one alone.
    other = home / "elsewhere" / "fresh.db"
    daemon = Daemon(home, extra_args=("--store", str(other))).start()
    try:
        assert other.exists()
    finally:
        stop(daemon)
    assert db.read_bytes().startswith(b"this is no SQLite database")


def test_the_cli_serves_another_store_too(home: Path) -> None:
    other = home / "fresh.db"
    process = subprocess.Popen(
        [SESSIOND, "serve", "--socket", str(home / "run" / "s.sock"), "--store", str(other)],
        env={**os.environ, "SESSIOND_HOME": str(home)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # its own line once it serves
        assert "serving on" in line, line
        assert other.exists()
        assert not (home / "state" / "sessiond.db").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(TIMEOUT) == 0


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` made read-only for root too: a read-only bind mount of itself."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o500)  # modes are enough for anyone but root
        try:
            yield
        finally:
            folder.chmod(0o700)
        return
    if _mount("--bind", str(folder), str(folder)).returncode != 0:
        pytest.skip("cannot bind-mount here to make a read-only folder")
    try:
        remounted = _mount("-o", "remount,bind,ro", str(folder))
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remounted.stderr.strip()}")
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=60)


def test_a_read_only_state_dir_is_named_by_serve(home: Path) -> None:
    state = home / "state"
    with read_only(state):
        refused = serve(home)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"sessiond: cannot write the state dir {state} ("), refused.stderr
    assert "make it writable" in refused.stderr
    assert "cannot reach the daemon" not in refused.stderr


def test_a_client_starting_the_daemon_says_what_the_daemon_said(home: Path) -> None:
    state = home / "state"
    env = {**os.environ, "SESSIOND_HOME": str(home)}
    env.pop("SESSIOND_SOCKET", None)
    env.pop("SESSIOND_STATE_DIR", None)
    with read_only(state):
        began = time.monotonic()
        new = subprocess.run(
            [SESSIOND, "new", "--root", str(home)],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        took = time.monotonic() - began
    assert new.returncode != 0
    assert "Traceback" not in new.stderr
    assert "cannot reach the daemon" not in new.stderr
    assert new.stderr.startswith(f"sessiond: cannot write the state dir {state} ("), new.stderr
    assert "make it writable" in new.stderr
    assert "exited with code 1" in new.stderr
    assert took < 15  # said at once, not after the start timeout
    # Its log went beside the socket, since the state dir could not take it.
    assert "cannot write the state dir" in (home / "run" / "daemon.log").read_text()
