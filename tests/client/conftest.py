"""Fixtures of the client's tests: a private SESSIOND_HOME, and a fake daemon in it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_sessiond import FakeDaemon

from sessiond.protocol import paths


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short private SESSIOND_HOME (unix socket paths must stay under 108 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
    for name in ("SESSIOND_SOCKET", "SESSIOND_STATE_DIR", "SESSIOND_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SESSIOND_HOME", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fake(home: Path) -> Iterator[FakeDaemon]:
    """The fake daemon (it stands in for sessiond), serving the default socket of ``home``."""
    socket = paths.socket_path()
    socket.parent.mkdir(parents=True, mode=0o700)
    daemon = FakeDaemon(socket).start()
    yield daemon
    daemon.stop()
