"""A client connection leaves nothing behind in the daemon once it has closed, whether it only
asked (no pygls server is built for it) or was told a turn's progress (it had one).

The daemon runs under a wrapper that, on SIGUSR1, counts (after a collection of everything,
what the daemon froze too) the objects the daemon makes for a connection that are still alive,
and writes the counts to a file: a test's window into the daemon's memory, not an API of the
daemon's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon, checked
from sessiond.client import aconnect
from sessiond.client.connection import Connection

COUNTING = """
import gc, json, os, signal, sys

def count(signum, frame):
    from pygls.lsp.server import LanguageServer
    from sessiond.daemon.door import Link
    from sessiond.daemon.lsp_outbound import ClientLsp
    from sessiond.daemon.server import Connection

    gc.unfreeze()  # what the daemon froze (long_lived.settle) is counted too
    gc.collect()
    kinds = {"Link": Link, "Connection": Connection, "ClientLsp": ClientLsp,
             "LanguageServer": LanguageServer}
    alive = {name: 0 for name in kinds}
    for obj in gc.get_objects():
        for name, kind in kinds.items():
            if isinstance(obj, kind):
                alive[name] += 1
    path = os.environ["SESSIOND_TEST_COUNTS"]
    with open(path + ".part", "w") as out:
        json.dump(alive, out)
    os.replace(path + ".part", path)

signal.signal(signal.SIGUSR1, count)
sys.argv[0] = "sessiond.daemon"
from sessiond.daemon.__main__ import main
sys.exit(main())
"""


class CountingDaemon(Daemon):
    python_args = ("-c", COUNTING)

    @property
    def counts_file(self) -> Path:
        return self.home / "alive.json"

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "SESSIOND_TEST_COUNTS": str(self.counts_file)}

    def alive(self, timeout: float = 60) -> dict[str, int]:
        """What of the connections is alive in the daemon now."""
        self.counts_file.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not self.counts_file.exists():
            assert time.monotonic() < deadline, "the daemon did not count its objects"
            time.sleep(0.01)
        counts: dict[str, int] = json.loads(self.counts_file.read_text())
        return counts


@pytest.fixture
def counting() -> Iterator[CountingDaemon]:
    with checked(CountingDaemon()) as running:
        yield running


@contextlib.asynccontextmanager
async def _taking_progress(socket: Path) -> AsyncIterator[Connection]:
    """A raw connection that takes work-done progress, as an editor's does."""
    reader, writer = await asyncio.open_unix_connection(str(socket))
    conn = Connection.open(reader, writer, peer=str(socket))
    try:
        await conn.request(
            "initialize", {"processId": None, "capabilities": {"window": {"workDoneProgress": True}}}
        )
        await conn.notify("initialized", {})
        yield conn
    finally:
        await conn.close()


async def test_connections_that_closed_leave_nothing_alive(counting: CountingDaemon, tmp_path: Path) -> None:
    async with aconnect(counting.socket, start=False) as watcher:
        session = await (await watcher.agent("demo")).session(tmp_path)
        one = counting.alive()
        assert one == {"Link": 1, "Connection": 1, "ClientLsp": 0, "LanguageServer": 0}, one
        for _ in range(300):
            async with aconnect(counting.socket, start=False) as other:
                await other.status()
        for n in range(50):
            async with _taking_progress(counting.socket) as editor:
                result = await editor.request("session/prompt", {"session": session.id, "prompt": "say hi"})
                assert result["stopReason"] == "end_turn"
                if n == 0:  # its turn was told as progress: through a pygls server of its own
                    assert counting.alive() == {
                        "Link": 2,
                        "Connection": 2,
                        "ClientLsp": 1,
                        "LanguageServer": 1,
                    }
        assert (await watcher.status()).clients == 1
        assert counting.alive() == one
