"""`sandbox`: bubblewrap, the project read-write at its own path, the rest of the system read-only."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from placement_helpers import PROBE_PYTHON, bwrap_problem, probe_results, write_probe

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
    assert argv == [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        # Shallowest first: a project under /tmp must be bound after the tmpfs, or it would be hidden.
        "--tmpfs", "/tmp", "--bind", "/cache", "/cache", "--ro-bind", "/data", "/data",
        "--bind", "/tmp/p", "/tmp/p",
        "--unshare-pid", "--unshare-net", "--die-with-parent", "--chdir", "/tmp/p/sub", "--", "make", "-j2",
    ]  # fmt: skip


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(option, destination) of each mount after the fixed ones, in order."""
    found, i = [], 8
    while argv[i] in ("--tmpfs", "--bind", "--ro-bind"):
        width = 2 if argv[i] == "--tmpfs" else 3
        found.append((argv[i], argv[i + width - 1]))
        i += width
    return found


def test_the_daemons_folders_are_empty_and_what_is_deeper_wins() -> None:
    argv = bwrap_argv(
        "/srv/state/work",  # a project inside a hidden folder: bound after the tmpfs over it
        "/srv/state/work",
        "true",
        [],
        hide=("/srv/state", "/home/u/.config/sessiond", "/run/user/1/sessiond"),
        rw_binds=("/home/u",),  # holds a hidden folder: bound before the tmpfs over it
    )
    assert mounts(argv) == [
        ("--tmpfs", "/tmp"),
        ("--tmpfs", "/srv/state"),
        ("--bind", "/home/u"),
        ("--bind", "/srv/state/work"),
        ("--tmpfs", "/home/u/.config/sessiond"),
        ("--tmpfs", "/run/user/1/sessiond"),
    ]
    # A project that holds a hidden folder: bound first, the folder covered after.
    assert mounts(bwrap_argv("/home/u", "/home/u", "true", [], hide=("/home/u/.local/state/sessiond",))) == [
        ("--tmpfs", "/tmp"),
        ("--bind", "/home/u"),
        ("--tmpfs", "/home/u/.local/state/sessiond"),
    ]
    # At one path the project (or an explicit bind) wins: the user asked for it.
    assert mounts(bwrap_argv("/srv/x", "/srv/x", "true", [], hide=("/srv/x",)))[-1] == ("--bind", "/srv/x")


def test_no_network_unless_asked_and_no_capabilities_when_asked() -> None:
    default = bwrap_argv("/p", "/p", "true", [])
    assert "--unshare-net" in default
    assert "--unshare-pid" in default
    assert "--cap-drop" not in default
    assert "--unshare-net" not in bwrap_argv("/p", "/p", "true", [], network=True)
    dropped = bwrap_argv("/p", "/p", "true", [], drop_caps=True)
    assert dropped[dropped.index("--cap-drop") + 1] == "ALL"
    assert dropped.index("--cap-drop") < dropped.index("--")


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
    # /tmp and /dev/shm are private to the command: what it leaves there is not the machine's.
    for folder in ("/tmp", "/dev/shm"):
        probe = f"{folder}/sessiond-sandbox-probe-{os.getpid()}"
        output, code = await run(placement, f"echo private > {probe} && cat {probe}")
        assert (output, code) == ("private\n", 0)
        assert not os.path.exists(probe)
    # The rest is read-only, the places other programs write to as well.
    for folder in ("/var/tmp", os.path.expanduser("~")):
        output, code = await run(placement, f"touch {folder}/sessiond-sandbox-probe-{os.getpid()}")
        assert code != 0
        assert "Read-only file system" in output
        assert not os.path.exists(f"{folder}/sessiond-sandbox-probe-{os.getpid()}")
    assert await placement.close() is None


@pytest.fixture
def fake_daemon(off_tmp: Path) -> Iterator[dict[str, Path]]:
    """A daemon's folders as serve lays them out under SESSIOND_HOME (outside /tmp, which is
    private in the sandbox anyway), its secrets, a socket that listens, and a project inside
    the state folder (the case where mount order matters)."""
    home = off_tmp / "home"
    dirs = {name: home / name for name in ("run", "state", "config")}
    for folder in dirs.values():
        folder.mkdir(parents=True)
    (dirs["state"] / "session-secret").write_text("s3cr3t-value\n")
    (dirs["state"] / "tcp-token").write_text("token\n")
    (dirs["config"] / "agents.toml").write_text("")
    project = dirs["state"] / "work"
    project.mkdir()
    (project / "hello.txt").write_text("hi\n")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(dirs["run"] / "sessiond.sock"))
    listener.listen()
    try:
        yield {**dirs, "home": home, "project": project, "socket": dirs["run"] / "sessiond.sock"}
    finally:
        listener.close()


def escape_checks(d: dict[str, Path]) -> list[str]:
    return [
        f"socket=unix:{d['socket']}",
        f"secret=read:{d['state']}/session-secret",
        f"token=read:{d['state']}/tcp-token",
        f"config=read:{d['config']}/agents.toml",
        # Around every mount: the file as this test process (standing in for the daemon) sees it.
        f"procroot=procroot:{os.getpid()}:{d['state']}/session-secret",
        f"outside=write:{d['home']}/written-outside",
        f"inside=write:{d['project']}/written-inside",
        f"project=read:{d['project']}/hello.txt",
    ]


@needs_bwrap
async def test_the_daemons_folders_are_empty_inside_and_a_project_within_one_still_works(
    fake_daemon: dict[str, Path], off_tmp: Path
) -> None:
    probe = write_probe(off_tmp)
    daemon_dirs = tuple(str(fake_daemon[name]) for name in ("run", "state", "config"))
    script = f"{PROBE_PYTHON} {probe} {' '.join(escape_checks(fake_daemon))}"
    # The control: the same probe, unconfined, gets everything (so each check can fail).
    here = make_placement(
        "here", root=str(fake_daemon["project"]), session_id="h", options=PlacementOptions()
    )
    output, _ = await run(here, script)
    assert set(probe_results(output).values()) == {"OK"}, output
    os.unlink(fake_daemon["home"] / "written-outside")
    await here.close()

    placement = make_placement(
        "sandbox",
        root=str(fake_daemon["project"]),
        session_id="s1",
        options=PlacementOptions(),
        daemon_dirs=(*daemon_dirs, str(off_tmp / "not-made-yet")),
    )
    await placement.prepare()
    output, code = await run(placement, script)
    results = probe_results(output)
    assert code == 0, output
    assert results["socket"].startswith("NO FileNotFoundError"), output
    for name in ("secret", "token", "config", "procroot"):
        assert results[name].startswith("NO FileNotFoundError"), output
    assert results["outside"] == "NO OSError: [Errno 30] Read-only file system: " + repr(
        f"{fake_daemon['home']}/written-outside"
    )
    assert (results["inside"], results["project"]) == ("OK", "OK")
    assert not (fake_daemon["home"] / "written-outside").exists()
    assert (fake_daemon["project"] / "written-inside").read_text() == "escaped\n"
    # The folders are there, and empty: nothing of the daemon's shows.
    for folder in daemon_dirs:
        output, code = await run(placement, f"ls -A {folder}")
        assert (output.split(), code) == (["work"] if folder.endswith("state") else [], 0)
    # Nor can the command take the cover off (as root, bwrap would leave it the power to).
    output, _ = await run(
        placement, f"umount -l {fake_daemon['state']}; cat {fake_daemon['state']}/session-secret"
    )
    assert "s3cr3t-value" not in output
    assert "No such file or directory" in output
    await placement.close()


@needs_bwrap
async def test_a_command_sees_only_its_own_processes_and_holds_no_capabilities(project: Path) -> None:
    placement = make_placement("sandbox", root=str(project), session_id="s1", options=PlacementOptions())
    await placement.prepare()
    output, _ = await run(placement, f"cat /proc/{os.getpid()}/cmdline; echo; grep CapEff /proc/self/status")
    assert "pytest" not in output  # this process, standing in for the daemon, is not there
    assert output.splitlines()[-1].split() == ["CapEff:", "0000000000000000"]
    # Its processes and their children: bwrap's init is 1, the command's shell 2.
    output, _ = await run(placement, "echo $$; ls /proc | grep -c '^[0-9]'")
    assert output.split()[0] == "2"
    assert int(output.split()[1]) <= 4
    await placement.close()


@needs_bwrap
async def test_no_network_unless_the_session_asks_for_it(project: Path, off_tmp: Path) -> None:
    probe = write_probe(off_tmp)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        script = f"{PROBE_PYTHON} {probe} tcp=tcp:127.0.0.1:{port}"
        closed = make_placement("sandbox", root=str(project), session_id="s1", options=PlacementOptions())
        await closed.prepare()
        assert probe_results((await run(closed, script))[0]) == {
            "tcp": "NO ConnectionRefusedError: [Errno 111] Connection refused"
        }
        opened = make_placement(
            "sandbox", root=str(project), session_id="s2", options=PlacementOptions(sandbox_network=True)
        )
        await opened.prepare()
        assert probe_results((await run(opened, script))[0]) == {"tcp": "OK"}
        await closed.close()
        await opened.close()


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
