"""Real daemons, each in a SESSIOND_HOME of its own, driven through the real Python client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon, checked
from sessiond.client import AsyncDaemon, aconnect


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with checked(Daemon()) as running:
        yield running


@pytest.fixture
async def client(daemon: Daemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(daemon.socket, start=False) as connected:
        yield connected


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root
