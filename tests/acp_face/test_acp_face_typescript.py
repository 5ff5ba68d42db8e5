"""A second implementation: the TypeScript ACP SDK's client walks `sessiond acp` (initialize, new,
prompt, cancel) as a node script (tests/acp_face/ts_client.mjs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import connect
from tests.acp_face.face import WAIT

SCRIPT = Path(__file__).with_name("ts_client.mjs")
SDK = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / "@agentclientprotocol" / "sdk"


def test_the_typescript_sdk_client_does_the_basic_walk(daemon: Daemon, work: Path) -> None:
    if shutil.which("node") is None or not SDK.exists():
        pytest.fail(f"{SDK} is missing: npm install --prefix tests/interop (it is in package.json)")
    done = subprocess.run(
        ["node", str(SCRIPT), str(work), sys.executable, "-m", "sessiond.client", "acp"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=2 * WAIT,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert "error" not in seen, seen
    assert (seen["protocolVersion"], seen["loadSession"], seen["agent"]) == (1, True, "sessiond")
    assert seen["first"] == {"stopReason": "end_turn", "texts": ["hello from TypeScript"]}
    assert seen["plan"][0] == ["Greet"]
    assert seen["commands"] == ["side", "tasks", "threads", "merge", "fleet"]
    assert seen["cancelled"] == "cancelled"
    with connect(daemon.socket, start=False) as client:
        info = client.session(seen["sessionId"]).info
        assert (info.root, info.turns, info.last_stop_reason) == (str(work), 2, "cancelled")
