"""SESSIOND_REQUIRE_UI=1 turns the UI suites' skips for a missing tool into failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MISSING_TOOL = """
from tests import toolchain

def test_needs_a_tool():
    toolchain.missing("the frobnicator is not installed: apt-get install frobnicator")
"""


def run(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tool.py").write_text(MISSING_TOOL)
    env = {k: v for k, v in os.environ.items() if k != "SESSIOND_REQUIRE_UI"}
    env["PYTHONPATH"] = str(REPO)
    if require is not None:
        env["SESSIOND_REQUIRE_UI"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_tool.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_tool_skips_with_its_reason(tmp_path: Path) -> None:
    done = run(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "the frobnicator is not installed: apt-get install frobnicator" in done.stdout


def test_with_the_switch_a_missing_tool_fails(tmp_path: Path) -> None:
    done = run(tmp_path, "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "the frobnicator is not installed" in done.stdout
    assert "SESSIOND_REQUIRE_UI=1: the UI tests must run here, not skip" in done.stdout
    assert run(tmp_path, "0").returncode == 0, "only 1 turns it on"
