"""The daemon runs on uvloop where it is installed, and on asyncio's own loop when
SESSIOND_LOOP=asyncio says so: either way it serves whole turns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import aconnect


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_the_daemon_serves_a_turn_on_the_loop_it_is_told(
    loop: str, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if loop == "asyncio":
        monkeypatch.setenv("SESSIOND_LOOP", "asyncio")
    else:
        monkeypatch.delenv("SESSIOND_LOOP", raising=False)  # the default
    daemon = Daemon().start()
    try:
        async with aconnect(daemon.socket, start=False) as client:
            session = await (await client.agent("demo")).session(work)
            reply = await session.asend("say hello")
            assert reply.text.strip() == "hello"
            # Which loop it is: uvloop's compiled loop is mapped into the daemon's memory or not.
            maps = Path(f"/proc/{daemon.pid}/maps").read_text()
            assert ("uvloop/loop." in maps) == (loop == "uvloop"), f"the daemon should run on {loop}"
    finally:
        daemon.stop()


def test_a_loop_it_does_not_know_is_refused_with_a_sentence(tmp_path: Path) -> None:
    env = {**os.environ, "SESSIOND_HOME": str(tmp_path), "SESSIOND_LOOP": "trio"}
    done = subprocess.run(
        [sys.executable, "-m", "sessiond.daemon", "--socket", str(tmp_path / "d.sock")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "SESSIOND_LOOP='trio': say 'uvloop' (the default) or 'asyncio'" in done.stderr
    assert not (tmp_path / "d.sock").exists()
