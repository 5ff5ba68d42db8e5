"""bench.side_by_side: the daemon at a git revision runs beside the working tree's, from the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.side_by_side import export

ROOT = Path(__file__).resolve().parent.parent


def test_a_revision_is_exported_as_the_package_its_daemon_runs() -> None:
    first = subprocess.run(
        ["git", "-C", str(ROOT), "rev-list", "--max-parents=0", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    code = export(first)
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{first}:daemon/core.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (code / "sessiond" / "daemon" / "core.py").read_text() == shown
    assert shown != (ROOT / "daemon" / "core.py").read_text()  # (so the run below tells them apart)
    # The package found first on its PYTHONPATH is that revision's, not the editable install.
    found = subprocess.run(
        [sys.executable, "-c", "import sessiond.daemon.core as c, sys; sys.stdout.write(c.__file__)"],
        env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(found) == code / "sessiond" / "daemon" / "core.py"


def side_by_side(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.side_by_side", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_rounds_through_both_daemons_and_straight_are_reported() -> None:
    done = side_by_side("--rounds", "2", "--turns", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "The daemon at HEAD beside the working tree's"
    for label in (
        "3 first turns at once, straight to the demo agent (ACP)",
        "the same through the daemon at HEAD",
        "the same through the daemon at the working tree",
        "the working tree against HEAD: a round",
        "the agent a round, the working tree",
    ):
        (row,) = [line for line in lines if line.startswith(label)]
        assert " ms " in row or "x " in row, row


def test_a_revision_git_does_not_know_is_said_plainly() -> None:
    done = side_by_side("--rev", "no-such-revision", "--rounds", "1")
    assert done.returncode == 1
    assert "git cannot export 'no-such-revision'" in done.stderr
