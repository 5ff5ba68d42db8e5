"""A client connection leaves nothing behind in the daemon once it has closed.

The daemon runs under a wrapper that, on SIGUSR1, counts (after a collection) the objects
the daemon makes for a connection that are still alive, and writes the counts to a file: a
test's window into the daemon's memory, not an API of the daemon's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon, checked
from sessiond.client import aconnect

COUNTING = """
import gc, json, os, signal, sys

def count(signum, frame):
    from pygls.lsp.server import LanguageServer
    from sessiond.daemon.door import Link
    from sessiond.daemon.server import Connection, SessiondProtocol

    gc.collect()
    kinds = {"Link": Link, "Connection": Connection, "SessiondProtocol": SessiondProtocol,
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


async def test_connections_that_closed_leave_nothing_alive(counting: CountingDaemon) -> None:
    async with aconnect(counting.socket, start=False) as watcher:
        await watcher.status()
        one = counting.alive()
        assert one == {"Link": 1, "Connection": 1, "SessiondProtocol": 1, "LanguageServer": 1}, one
        for _ in range(300):
            async with aconnect(counting.socket, start=False) as other:
                await other.status()
        assert (await watcher.status()).clients == 1
        assert counting.alive() == one
