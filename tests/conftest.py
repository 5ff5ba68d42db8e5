"""What every test may take for granted, however the suite was started; and the fixtures most
tests share: `work` (a directory for sessions), `client` (the Python client on the `daemon`
fixture that the test's own folder or module defines)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect

# A suite started as a background job of a shell without job control (`./dev test &` in a
# script, some CI runners) begins with SIGINT ignored, and so would every process the tests
# start: then nothing can be interrupted, and the tests of Ctrl-C hang. Python's own handler
# it is, here (KeyboardInterrupt) and, as exec resets a handled signal, in every child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
async def client(daemon: Daemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(daemon.socket, start=False) as connected:
        yield connected
