"""Every example under examples/ runs against a real daemon (in a temporary SESSIOND_HOME)
and says what it should."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import connect

pytestmark = pytest.mark.timeout(180)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    running.stop()
    shutil.rmtree(running.home, ignore_errors=True)


def run_example(daemon: Daemon, name: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_each_example_says_what_it_does_and_how_to_run_it(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring, f"{path.name} has no docstring"
    assert f"python examples/{path.name}" in docstring


def test_fanout_reviews_every_file_in_order(daemon: Daemon, tmp_path: Path) -> None:
    for name in ["b.py", "a.py", "sub/c.txt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\nsecond line\n")
    lines = run_example(daemon, "fanout.py", str(tmp_path))
    assert lines[0] == f"fanning out over 3 files in {tmp_path}"
    assert lines[1:4] == [
        f"a.py: {tmp_path / 'a.py'} has 2 lines. First line: # a.py / reviewed a.py",
        f"b.py: {tmp_path / 'b.py'} has 2 lines. First line: # b.py / reviewed b.py",
        f"sub/c.txt: {tmp_path / 'sub/c.txt'} has 2 lines. First line: # sub/c.txt / reviewed c.txt",
    ]
    assert re.fullmatch(r"3 sessions in \d+\.\d\d s", lines[4])
    assert lines[5].endswith(f"at {daemon.socket} (pid {daemon.pid})")  # the daemon it was given
    with connect(daemon.socket, start=False) as client:
        infos = [s.info for s in client.sessions(include_closed=True)]
    infos = [info for info in infos if info.root == str(tmp_path)]
    assert len(infos) == 3
    for info in infos:  # each session's plan is done, and its turn counted tokens
        assert info.plan is not None
        assert [entry.status for entry in info.plan.entries] == ["completed", "completed"]
        assert info.usage is not None
        assert info.usage.input_tokens
        assert info.usage.output_tokens


def test_fanout_async_does_the_same_as_a_run(daemon: Daemon) -> None:
    lines = run_example(daemon, "fanout_async.py")  # on its sample project, in the daemon's state folder
    assert lines[0] == f"fanning out over 4 files in {daemon.home / 'state' / 'sample-project'}"
    assert [line.split(":")[0] for line in lines[1:5]] == [
        "README.md",
        "app.py",
        "tests/test_util.py",
        "util.py",
    ]
    assert all(line.endswith(f"reviewed {Path(line.split(':')[0]).name}") for line in lines[1:5])
    match = re.fullmatch(r"run (r-\w+) completed: 4 sessions, 4 turns", lines[5])
    assert match, lines[5]
    assert re.fullmatch(r"turns ran \d+\.\d\d s in all; took \d+\.\d\d s", lines[6])
    with connect(daemon.socket, start=False) as client:
        run = client.get_run(match.group(1))
    assert (run.name, run.outcome, run.argv[0]) == (
        "fanout-async",
        "completed",
        str(EXAMPLES / "fanout_async.py"),
    )


def test_fanout_without_a_directory_writes_its_sample_project_afresh_in_one_place(daemon: Daemon) -> None:
    sample = daemon.home / "state" / "sample-project"
    first = run_example(daemon, "fanout.py")
    (sample / "app.py").write_text("changed by hand\n")  # a later run writes it afresh
    (sample / "stray.txt").write_text("left by someone\n")
    second = run_example(daemon, "fanout.py")
    assert first[0] == f"fanning out over 4 files in {sample}"
    assert second[0] == f"fanning out over 4 files in {sample}"  # the same folder, not a new one
    assert (sample / "app.py").read_text() == "def main():\n    print('hello')\n"
    assert not (sample / "stray.txt").exists()


def test_coordinator_gathers_its_threads_reports_and_merges_them_one_at_a_time(daemon: Daemon) -> None:
    lines = run_example(daemon, "coordinator.py")
    repo = Path(lines[0].removeprefix("repository "))
    assert re.fullmatch(r"coordinator s\d+ started 3 threads, each in a worktree", lines[1])
    assert [line.split(":")[0] for line in lines[2:5]] == ["report parser", "report printer", "report docs"]
    assert all(", plan 2/2, '" in line for line in lines[2:5])
    assert lines[5:8] == ["merge parser: merged", "merge printer: merged", "merge docs: merged"]
    assert re.fullmatch(r"tree: s\d+ with 3 threads, \d+ tokens", lines[8])
    assert lines[-1] == "files: NOTES.md, README.md, parser.py, printer.py"
    assert sorted(p.name for p in repo.iterdir() if not p.name.startswith(".")) == [
        "NOTES.md",
        "README.md",
        "parser.py",
        "printer.py",
    ]
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout
    assert len(worktrees.splitlines()) == 1  # each thread's worktree was cleaned up after its merge
    shutil.rmtree(repo, ignore_errors=True)
