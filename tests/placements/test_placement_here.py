"""`here` and `sandbox`: files and commands in the root, confined to it, on this machine.

The two share their file and terminal behaviour; each test runs for both (the
sandbox ones are skipped, saying why, where bubblewrap cannot run).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from placement_helpers import bwrap_problem, gone, make_escapes

from sessiond.daemon import confine
from sessiond.daemon.placements import (
    PathOutsideRoot,
    Placement,
    PlacementError,
    PlacementOptions,
    UnknownTerminal,
    make_placement,
)
from sessiond.daemon.placements.local import LocalPlacement

pytestmark = pytest.mark.timeout(30)
BWRAP_PROBLEM = bwrap_problem()


def pid_of(placement: Placement, terminal_id: str) -> int:
    """The terminal's process (its group's leader); every local placement keeps a `Terminals`."""
    assert isinstance(placement, LocalPlacement)
    return placement.terminals.get(terminal_id).process.pid


@pytest.fixture(params=["here", "sandbox"])
async def placement(request: pytest.FixtureRequest, project: Path) -> AsyncIterator[Placement]:
    if request.param == "sandbox" and BWRAP_PROBLEM:
        pytest.skip(BWRAP_PROBLEM)
    made = make_placement(request.param, root=str(project), session_id="s1", options=PlacementOptions())
    await made.prepare()
    yield made
    await made.close()


async def test_reads_and_writes_relative_and_absolute_paths(placement: Placement, project: Path) -> None:
    assert await placement.read_text("hello.txt") == "hi\n"
    written = await placement.write_text("new/deep/file.txt", "content\n")
    assert written == str(project / "new" / "deep" / "file.txt")
    assert (project / "new" / "deep" / "file.txt").read_text() == "content\n"
    await placement.write_text(str(project / "sub" / "abs.txt"), "abs")
    assert await placement.read_text(str(project / "sub" / "abs.txt")) == "abs"


async def test_file_problems_are_sentences(placement: Placement, project: Path) -> None:
    with pytest.raises(PlacementError, match="no such file"):
        await placement.read_text("missing.txt")
    with pytest.raises(PlacementError, match="is a directory"):
        await placement.read_text("sub")
    (project / "bin.dat").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PlacementError, match="not UTF-8"):
        await placement.read_text("bin.dat")
    with pytest.raises(PlacementError, match="is a directory"):
        await placement.write_text("sub", "x")


async def test_every_escape_is_refused_for_reading_and_writing(placement: Placement, project: Path) -> None:
    outside = project.parent / "outside"
    for path in make_escapes(project, outside):
        with pytest.raises(PathOutsideRoot, match="outside the session's root"):
            await placement.read_text(path)
        with pytest.raises(PathOutsideRoot):
            await placement.write_text(path, "pwned")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"
    # The old check's exception type still catches it.
    with pytest.raises(confine.PathOutsideRoot):
        await placement.read_text("../outside/secret.txt")


async def test_a_command_runs_in_the_root_with_its_env(placement: Placement, project: Path) -> None:
    tid = await placement.create_terminal(
        "sh", ["-c", "pwd; echo $GREETING; echo oops >&2; exit 3"], {"GREETING": "hello"}, None, None
    )
    assert await placement.wait_for_terminal_exit(tid) == (3, None)
    output, truncated, code, signal = await placement.terminal_output(tid)
    assert output.splitlines() == [str(project), "hello", "oops"]
    assert (truncated, code, signal) == (False, 3, None)
    await placement.release_terminal(tid)
    with pytest.raises(UnknownTerminal, match="no terminal"):
        await placement.terminal_output(tid)


async def test_a_command_can_run_in_a_subfolder_but_not_outside(placement: Placement, project: Path) -> None:
    tid = await placement.create_terminal("pwd", [], {}, "sub", None)
    await placement.wait_for_terminal_exit(tid)
    assert (await placement.terminal_output(tid))[0].strip() == str(project / "sub")
    for cwd in ("..", "/tmp", str(project.parent / "outside")):
        with pytest.raises(PathOutsideRoot):
            await placement.create_terminal("pwd", [], {}, cwd, None)


async def test_output_keeps_the_end_within_the_byte_limit(placement: Placement) -> None:
    tid = await placement.create_terminal("sh", ["-c", "seq 1 5000; echo THE-END"], {}, None, 100)
    await placement.wait_for_terminal_exit(tid)
    output, truncated, code, _ = await placement.terminal_output(tid)
    assert truncated
    assert code == 0
    assert len(output.encode()) <= 100
    assert output.endswith("THE-END\n")


async def test_kill_and_release_leave_no_process(placement: Placement) -> None:
    tid = await placement.create_terminal("sh", ["-c", "sleep 60 & sleep 60"], {}, None, None)
    pgid = pid_of(placement, tid)
    await placement.kill_terminal(tid)
    assert await placement.wait_for_terminal_exit(tid) == (None, "SIGKILL")
    assert await gone(pgid)
    other = await placement.create_terminal("sleep", ["60"], {}, None, None)
    pgid = pid_of(placement, other)
    await placement.release_terminal(other)
    assert await gone(pgid)


async def test_close_kills_every_terminal(project: Path) -> None:
    placement = make_placement("here", root=str(project), session_id="s1", options=PlacementOptions())
    await placement.prepare()
    tids = [await placement.create_terminal("sleep", ["60"], {}, None, None) for _ in range(3)]
    pgids = [pid_of(placement, t) for t in tids]
    assert await asyncio.wait_for(placement.close(), 10) is None
    assert all([await gone(p) for p in pgids])


async def test_a_missing_command_is_a_clear_error(placement: Placement) -> None:
    with pytest.raises(PlacementError, match="command not found: 'no-such-command-xyz'"):
        await placement.create_terminal("no-such-command-xyz", [], {}, None, None)


async def test_a_missing_root_fails_prepare_and_a_retry_works(tmp_path: Path) -> None:
    root = tmp_path / "later"
    placement = make_placement("here", root=str(root), session_id="s1", options=PlacementOptions())
    with pytest.raises(PlacementError, match="not an existing directory"):
        await placement.prepare()
    os.mkdir(root)
    await placement.prepare()
    assert await placement.write_text("a.txt", "a") == str(root / "a.txt")
