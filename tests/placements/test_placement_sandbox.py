"""`sandbox`: bubblewrap, the project read-write at its own path, the rest of the system read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from placement_helpers import bwrap_problem

from sessiond.daemon.placements import Placement, PlacementError, PlacementOptions, make_placement
from sessiond.daemon.placements.sandbox import bwrap_argv

pytestmark = pytest.mark.timeout(30)
BWRAP_PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=BWRAP_PROBLEM or "")


async def run(placement: Placement, script: str) -> tuple[str, int | None]:
    tid = await placement.create_terminal("sh", ["-c", script], {}, None, None)
    code, _ = await placement.wait_for_terminal_exit(tid)
    output = (await placement.terminal_output(tid))[0]
    await placement.release_terminal(tid)
    return output, code


def test_the_command_line_binds_the_project_after_the_private_tmp() -> None:
    argv = bwrap_argv("/tmp/p", "/tmp/p/sub", "make", ["-j2"], rw_binds=("/cache",), ro_binds=("/data",))
    assert argv[:10] == [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    # A project under /tmp must be bound after the tmpfs, or the tmpfs would hide it.
    assert argv.index("--bind") > argv.index("--tmpfs")
    assert argv[argv.index("--bind") : argv.index("--bind") + 3] == ["--bind", "/tmp/p", "/tmp/p"]
    assert argv[13:16] == ["--bind", "/cache", "/cache"]
    assert argv[16:19] == ["--ro-bind", "/data", "/data"]
    assert argv[-5:] == ["--chdir", "/tmp/p/sub", "--", "make", "-j2"]
    assert "--die-with-parent" in argv
    assert "--unshare-net" not in argv
    assert "--unshare-net" in bwrap_argv("/p", "/p", "true", [], unshare_net=True)


@needs_bwrap
async def test_inside_the_project_is_writable_at_its_own_path_and_the_rest_is_not(project: Path) -> None:
    placement = make_placement("sandbox", root=str(project), session_id="s1", options=PlacementOptions())
    await placement.prepare()
    output, code = await run(placement, f"pwd; cat hello.txt; touch {project}/made-inside && echo touched")
    assert (output.splitlines(), code) == ([str(project), "hi", "touched"], 0)
    assert (project / "made-inside").exists()
    marker = f"/etc/sessiond-sandbox-test-{os.getpid()}"
    output, code = await run(placement, f"touch {marker}")
    assert code != 0
    assert "Read-only file system" in output
    assert not os.path.exists(marker)
    output, code = await run(placement, f"touch {project.parent}/outside/x")
    assert code != 0
    assert not (project.parent / "outside" / "x").exists()
    # /tmp is private to the command: what it leaves there is not the machine's.
    output, code = await run(
        placement, "echo private > /tmp/sessiond-sandbox-probe && cat /tmp/sessiond-sandbox-probe"
    )
    assert (output, code) == ("private\n", 0)
    assert not os.path.exists("/tmp/sessiond-sandbox-probe")
    assert await placement.close() is None


@needs_bwrap
async def test_extra_binds_are_writable_or_read_only_as_asked(project: Path, tmp_path: Path) -> None:
    cache, data = tmp_path / "cache", tmp_path / "data"
    cache.mkdir()
    data.mkdir()
    options = PlacementOptions(sandbox_rw_binds=(str(cache),), sandbox_ro_binds=(str(data),))
    placement = make_placement("sandbox", root=str(project), session_id="s1", options=options)
    await placement.prepare()
    _, code = await run(placement, f"touch {cache}/ok")
    assert code == 0
    assert (cache / "ok").exists()
    _, code = await run(placement, f"touch {data}/no")
    assert code != 0
    assert not (data / "no").exists()
    await placement.close()


@needs_bwrap
async def test_without_bwrap_prepare_says_how_to_install_it_and_a_retry_works(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    placement = make_placement("sandbox", root=str(project), session_id="s1", options=PlacementOptions())
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PlacementError, match=r"bubblewrap.*apt-get install bubblewrap"):
        await placement.prepare()
    with pytest.raises(PlacementError, match="not up yet"):
        await placement.create_terminal("true", [], {}, None, None)
    monkeypatch.setenv("PATH", path)
    await placement.prepare()
    assert (await run(placement, "echo back"))[0] == "back\n"
    await placement.close()
