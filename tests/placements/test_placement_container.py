"""`container`: docker or podman. The command lines are pure functions; the flow runs against a
stand-in engine CLI; the real-engine test runs only where an engine works, and says so when skipped."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from placement_helpers import gone, make_escapes

from sessiond.daemon.placements import PathOutsideRoot, PlacementError, PlacementOptions, make_placement
from sessiond.daemon.placements.container import (
    ContainerPlacement,
    exec_argv,
    find_engine,
    kill_argv,
    rm_argv,
    run_argv,
)

pytestmark = pytest.mark.timeout(60)
# Where a command's pid is kept inside the container: the stand-in engine's "inside" is this machine.
PIDFILES = "/tmp/.sessiond-*.pid"


@pytest.fixture(autouse=True, scope="module")
def _pidfiles_go() -> Iterator[None]:
    """The pid files the stand-in's commands left in this machine's /tmp (a real engine's go with
    the container) are removed after this module, which alone makes them."""
    before = set(glob.glob(PIDFILES))
    yield
    for path in set(glob.glob(PIDFILES)) - before:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


FAKE_ENGINE = r"""#!/bin/bash
# A stand-in for docker: logs its arguments; `exec` runs the command here, as the engine would inside.
printf '%s\n' "$*" >> "$FAKE_ENGINE_LOG"
case "$1" in
  info)
    if [ -n "$FAKE_ENGINE_BROKEN" ]; then echo "Cannot connect to the Docker daemon" >&2; exit 1; fi
    exit 0 ;;
  run) echo "c0ffee$RANDOM"; exit 0 ;;
  inspect) echo true; exit 0 ;;
  rm) exit 0 ;;
  exec)
    shift; cwd=.; envs=()
    while [ $# -gt 0 ]; do
      case "$1" in -w) cwd=$2; shift 2 ;; -e) envs+=("$2"); shift 2 ;; *) break ;; esac
    done
    shift  # the container
    cd "$cwd" && exec env "${envs[@]}" "$@" ;;
esac
exit 2
"""


def test_run_builds_the_container_as_the_user_with_the_project_at_its_own_path() -> None:
    argv = run_argv(
        "docker", name="sessiond-s1-ab", image="python:3.12", root="/home/u/p", uid=1000, gid=1000,
        session_id="s1", extra=("--cpus", "2"),
    )  # fmt: skip
    assert argv == [
        "docker", "run", "-d", "--rm", "--name", "sessiond-s1-ab", "--label", "sessiond.session=s1",
        "--user", "1000:1000", "--network", "none", "-v", "/home/u/p:/home/u/p", "-w", "/home/u/p",
        "--cpus", "2", "python:3.12", "sleep", "infinity",
    ]  # fmt: skip
    podman = run_argv("podman", name="n", image="i", root="/p", uid=1000, gid=1000, session_id="s1")
    assert "--userns=keep-id" in podman
    assert "--userns=keep-id" not in run_argv(
        "podman", name="n", image="i", root="/p", uid=0, gid=0, session_id="s"
    )


def test_no_network_unless_asked_or_named_in_the_run_arguments() -> None:
    def run(extra: tuple[str, ...] = (), network: bool = False) -> list[str]:
        return run_argv(
            "docker",
            name="n",
            image="i",
            root="/p",
            uid=1,
            gid=1,
            session_id="s",
            extra=extra,
            network=network,
        )

    argv = run()
    assert argv[argv.index("--network") : argv.index("--network") + 2] == ["--network", "none"]
    assert "--network" not in run(network=True)
    # The user's own choice of network is theirs: ours would conflict with it.
    assert "--network" not in run(extra=("--network=host",))
    assert "--network" not in run(extra=("--net", "bridge"))


def test_the_daemons_folders_inside_the_project_are_covered_by_an_empty_tmpfs() -> None:
    """Only the project is mounted: a daemon folder elsewhere is not in the container at all."""
    argv = run_argv(
        "docker", name="n", image="i", root="/home/u", uid=1, gid=1, session_id="s",
        hide=("/home/u/.local/state/sessiond", "/run/user/1/sessiond", "/home/u"),
    )  # fmt: skip
    assert argv.count("--tmpfs") == 1
    assert argv[argv.index("--tmpfs") : argv.index("--tmpfs") + 2] == [
        "--tmpfs",
        "/home/u/.local/state/sessiond",
    ]
    assert argv.index("--tmpfs") > argv.index("-v")
    # A project inside a daemon folder is mounted as asked (only it, not the rest of the folder).
    inner = run_argv("docker", name="n", image="i", root="/srv/state/p", uid=1, gid=1, session_id="s",
                     hide=("/srv/state",))  # fmt: skip
    assert "--tmpfs" not in inner


def test_exec_kill_and_rm_command_lines() -> None:
    argv = exec_argv(
        "podman",
        "cid",
        cwd="/p/sub",
        env={"A": "x y"},
        command="pytest",
        args=["-q", "a b"],
        pidfile="/tmp/.s.pid",
    )
    assert argv[:6] == ["podman", "exec", "-w", "/p/sub", "-e", "A=x y"]
    assert argv[6:9] == ["cid", "sh", "-c"]
    assert argv[-3:] == ["pytest", "-q", "a b"]
    assert "/tmp/.s.pid" in argv[9]
    assert 'exec "$0" "$@"' in argv[9]
    kill = kill_argv("docker", "cid", "/tmp/.s.pid")
    assert kill[:5] == ["docker", "exec", "cid", "sh", "-c"]
    assert 'kill -KILL -- "-$p"' in kill[5]
    assert rm_argv("docker", "cid") == ["docker", "rm", "-f", "cid"]


def test_an_image_is_required_at_open() -> None:
    with pytest.raises(PlacementError, match="needs an image"):
        make_placement("container", root="/p", session_id="s1", options=PlacementOptions())
    with pytest.raises(PlacementError, match="not one of docker, podman"):
        make_placement("container", root="/p", session_id="s1",
                       options=PlacementOptions(container_image="i", container_engine="lxc"))  # fmt: skip


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    engine = folder / "docker"
    engine.write_text(FAKE_ENGINE)
    engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "engine.log"
    monkeypatch.setenv("FAKE_ENGINE_LOG", str(log))
    # Only the stand-in on PATH first, so a real docker or podman is never reached.
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return log


async def test_no_working_engine_is_a_clear_error_and_a_retry_works(
    fake_engine: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_BROKEN", "1")
    options = PlacementOptions(container_image="busybox", container_engine="docker")
    placement = make_placement("container", root=str(project), session_id="s1", options=options)
    with pytest.raises(
        PlacementError, match="no container engine works here: docker info failed: Cannot connect"
    ):
        await placement.prepare()
    with pytest.raises(PlacementError, match="not up yet"):
        await placement.create_terminal("true", [], {}, None, None)
    monkeypatch.delenv("FAKE_ENGINE_BROKEN")
    await placement.prepare()
    assert await placement.close() is None


async def test_the_placement_hides_the_daemons_folders_it_is_given_and_asks_for_network_as_set(
    fake_engine: Path, project: Path
) -> None:
    state = project / "state"  # a daemon whose state folder is inside the project
    state.mkdir()
    options = PlacementOptions(container_image="busybox", container_engine="docker", container_network=True)
    placement = make_placement(
        "container",
        root=str(project),
        session_id="s1",
        options=options,
        daemon_dirs=(str(state), str(project.parent / "absent")),
    )
    await placement.prepare()
    run_line = fake_engine.read_text().splitlines()[1]
    assert f"--tmpfs {state} " in run_line
    assert run_line.count("--tmpfs") == 1  # a folder that does not exist is not mounted over
    assert "--network" not in run_line
    await placement.close()


@pytest.fixture
async def container(fake_engine: Path, project: Path) -> AsyncIterator[ContainerPlacement]:
    options = PlacementOptions(container_image="busybox", container_engine="docker")
    placement = make_placement("container", root=str(project), session_id="s1", options=options)
    assert isinstance(placement, ContainerPlacement)
    await placement.prepare()
    yield placement
    await placement.close()


async def test_with_a_stand_in_engine_commands_go_through_exec_and_close_removes_it(
    container: ContainerPlacement, project: Path, fake_engine: Path
) -> None:
    assert container.container is not None
    assert container.container.startswith("c0ffee")
    run_line = fake_engine.read_text().splitlines()[1]
    assert run_line.startswith("run -d --rm --name sessiond-s1-")
    assert f"-v {project}:{project}" in run_line
    assert f"--user {os.getuid()}:{os.getgid()}" in run_line
    assert "--network none" in run_line
    tid = await container.create_terminal("sh", ["-c", 'pwd; echo "$X"'], {"X": "from env"}, "sub", None)
    assert await container.wait_for_terminal_exit(tid) == (0, None)
    assert (await container.terminal_output(tid))[0].splitlines() == [str(project / "sub"), "from env"]
    cid = container.container
    await container.close()
    assert fake_engine.read_text().splitlines()[-1] == f"rm -f {cid}"


async def test_a_killed_command_is_killed_where_it_runs(container: ContainerPlacement) -> None:
    tid = await container.create_terminal("sh", ["-c", "sleep 60 & sleep 60"], {}, None, None)
    pidfile = container._pidfiles[tid]
    for _ in range(200):  # the command writes its pid as it starts
        if os.path.exists(pidfile) and Path(pidfile).read_text().strip():
            break
        await asyncio.sleep(0.01)
    pid = int(Path(pidfile).read_text())
    await container.kill_terminal(tid)
    await asyncio.wait_for(container.wait_for_terminal_exit(tid), 10)
    assert await gone(pid)
    assert not os.path.exists(pidfile)


async def test_files_are_the_projects_own_and_confined(container: ContainerPlacement, project: Path) -> None:
    assert await container.write_text("out.txt", "x") == str(project / "out.txt")
    for path in make_escapes(project, project.parent / "outside"):
        with pytest.raises(PathOutsideRoot):
            await container.write_text(path, "pwned")
    with pytest.raises(PathOutsideRoot):
        await container.create_terminal("pwd", [], {}, "..", None)


async def test_a_real_engine_runs_commands_as_the_user_in_the_project(project: Path) -> None:
    """Where docker or podman works: skipped otherwise, with the engines' own reasons."""
    try:
        engine = await find_engine()
    except PlacementError as exc:
        pytest.skip(str(exc))
    image = os.environ.get("SESSIOND_TEST_CONTAINER_IMAGE", "busybox:latest")
    options = PlacementOptions(container_image=image, container_engine=os.path.basename(engine))
    placement = make_placement("container", root=str(project), session_id="s1", options=options)
    await placement.prepare()
    try:
        tid = await placement.create_terminal(
            "sh", ["-c", "pwd; id -u; cat hello.txt; touch made"], {}, None, None
        )
        assert await placement.wait_for_terminal_exit(tid) == (0, None)
        output = (await placement.terminal_output(tid))[0].splitlines()
        assert output == [str(project), str(os.getuid()), "hi"]
        assert (project / "made").stat().st_uid == os.getuid()
    finally:
        assert await placement.close() is None
