"""Real daemons, each in a SESSIOND_HOME of its own, driven through the real Python client."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    code = running.stop()
    # The daemon's own words, shown with a failing test's report.
    print("\n".join(["--- daemon stderr", *running.stderr]))
    assert code == 0, f"the daemon exited with {code}"
    shutil.rmtree(running.home, ignore_errors=True)


@pytest.fixture
async def client(daemon: Daemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(daemon.socket, start=False) as connected:
        yield connected


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root
