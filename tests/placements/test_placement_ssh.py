"""`ssh`: commands and file writes land on a real OpenSSH server (on 127.0.0.1, started by a fixture)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from placement_helpers import Sshd, free_port, gone, group_alive, make_escapes

from sessiond.daemon.placements import (
    PathOutsideRoot,
    PlacementError,
    PlacementOptions,
    UnknownTerminal,
    make_placement,
)
from sessiond.daemon.placements.ssh import SshPlacement, Target, parse_target
from sessiond.daemon.placements.ssh_terminals import remote_script

pytestmark = pytest.mark.timeout(30)


def test_targets_parse_and_bad_ones_are_refused() -> None:
    assert parse_target("me@host") == Target("me", "host", None)
    assert parse_target("me@host:2222") == Target("me", "host", 2222)
    assert parse_target("host.example") == Target(None, "host.example", None)
    assert parse_target("me@[::1]:22") == Target("me", "::1", 22)
    assert str(parse_target("me@[::1]:22")) == "me@[::1]:22"
    for bad in ("", "me@", "me@host:0", "me@host:99999", "a b@host", "me@host:port"):
        with pytest.raises(PlacementError, match="user@host"):
            parse_target(bad)
    with pytest.raises(PlacementError, match="needs a target"):
        make_placement("ssh", root="/x", session_id="s1", options=PlacementOptions())


def test_the_remote_command_is_quoted_and_refuses_bad_env_names() -> None:
    script = remote_script("printf", ["%s\n", "it's $HOME"], {"A": "x y"}, "/dir with space")
    assert script.startswith("exec /bin/sh -c ")
    with pytest.raises(PlacementError, match="not valid"):
        remote_script("true", [], {"A;rm -rf /": "x"}, "/")


@pytest.fixture
def target_dir(sshd: Sshd, tmp_path: Path) -> Path:
    # The target is this machine, so what lands there can be checked on the local disk.
    root = tmp_path / "on-target"
    (root / "sub").mkdir(parents=True)
    (root / "hello.txt").write_text("hi\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return root


@pytest.fixture
async def placement(sshd: Sshd, target_dir: Path) -> AsyncIterator[SshPlacement]:
    made = make_placement("ssh", root="/local/root", session_id="s1", options=sshd.options(str(target_dir)))
    assert isinstance(made, SshPlacement)
    await made.prepare()
    yield made
    await made.close()


async def run(
    placement: SshPlacement,
    command: str,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> tuple[str, int | None]:
    tid = await placement.create_terminal(command, list(args), env or {}, cwd, None)
    code, _ = await placement.wait_for_terminal_exit(tid)
    output = (await placement.terminal_output(tid))[0]
    await placement.release_terminal(tid)
    return output, code


async def test_files_are_read_and_written_on_the_target(placement: SshPlacement, target_dir: Path) -> None:
    assert placement.root == str(target_dir)
    assert placement.host is not None
    assert "127.0.0.1" in placement.host
    assert await placement.read_text("hello.txt") == "hi\n"
    written = await placement.write_text("new/deep/file.txt", "from the agent\n")
    assert written == str(target_dir / "new" / "deep" / "file.txt")
    assert (target_dir / "new" / "deep" / "file.txt").read_text() == "from the agent\n"
    assert await placement.read_text(str(target_dir / "new" / "deep" / "file.txt")) == "from the agent\n"
    with pytest.raises(PlacementError, match="no such file"):
        await placement.read_text("missing.txt")
    with pytest.raises(PlacementError, match="is a directory"):
        await placement.read_text("sub")
    (target_dir / "bin.dat").write_bytes(b"\xff\xfe")
    with pytest.raises(PlacementError, match="not UTF-8"):
        await placement.read_text("bin.dat")


async def test_every_escape_is_refused_on_the_target(placement: SshPlacement, target_dir: Path) -> None:
    outside = target_dir.parent / "outside"
    for path in make_escapes(target_dir, outside):
        with pytest.raises(PathOutsideRoot, match="outside the session's root"):
            await placement.read_text(path)
        with pytest.raises(PathOutsideRoot):
            await placement.write_text(path, "pwned")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    for cwd in ("..", "/tmp", "link_out"):
        with pytest.raises(PathOutsideRoot):
            await placement.create_terminal("pwd", [], {}, cwd, None)


async def test_commands_run_on_the_target_in_the_sessions_directory(
    placement: SshPlacement, target_dir: Path
) -> None:
    output, code = await run(
        placement, "sh", "-c", 'pwd; echo "$GREETING"; echo oops >&2; exit 4', env={"GREETING": "it's me"}
    )
    assert (output.splitlines(), code) == ([str(target_dir), "it's me", "oops"], 4)
    output, code = await run(placement, "pwd", cwd="sub")
    assert (output.strip(), code) == (str(target_dir / "sub"), 0)
    output, code = await run(placement, "sh", "-c", "touch made-by-command")
    assert code == 0
    assert (target_dir / "made-by-command").exists()
    output, code = await run(placement, "no-such-command-xyz")
    assert code == 127
    assert "no-such-command-xyz" in output


async def test_output_is_bounded_by_the_byte_limit(placement: SshPlacement) -> None:
    tid = await placement.create_terminal("sh", ["-c", "seq 1 20000; echo THE-END"], {}, None, 200)
    await placement.wait_for_terminal_exit(tid)
    output, truncated, code, _ = await placement.terminal_output(tid)
    assert truncated
    assert code == 0
    assert len(output.encode()) <= 200
    assert output.endswith("THE-END\n")


async def test_kill_and_release_leave_no_process_on_the_target(placement: SshPlacement) -> None:
    tid = await placement.create_terminal("sh", ["-c", "sleep 60 & sleep 60"], {}, None, None)
    pid = placement.terminals.get(tid).process.pid
    assert pid > 0
    assert group_alive(pid)
    await placement.kill_terminal(tid)
    assert await asyncio.wait_for(placement.wait_for_terminal_exit(tid), 10) == (None, "SIGKILL")
    assert await gone(pid)
    other = await placement.create_terminal("sleep", ["60"], {}, None, None)
    pid = placement.terminals.get(other).process.pid
    await placement.release_terminal(other)
    assert await gone(pid)
    with pytest.raises(UnknownTerminal):
        await placement.terminal_output(other)
    last = await placement.create_terminal("sleep", ["60"], {}, None, None)
    pid = placement.terminals.get(last).process.pid
    await placement.close()
    assert await gone(pid)


async def test_an_unreachable_host_is_a_clear_error_and_a_retry_works(sshd: Sshd, target_dir: Path) -> None:
    port = free_port()  # nothing listens there
    placement = make_placement("ssh", root="/r", session_id="s1", options=sshd.options(str(target_dir), port))
    with pytest.raises(
        PlacementError, match=rf"cannot connect to ssh target {sshd.user}@127.0.0.1:{port}: .*refused"
    ):
        await placement.prepare()
    with pytest.raises(PlacementError, match="not connected"):
        await placement.read_text("hello.txt")
    # A missing directory on the target is its own clear error; once it exists, prepare succeeds.
    later = target_dir / "later"
    retry = make_placement("ssh", root="/r", session_id="s1", options=sshd.options(str(later)))
    with pytest.raises(PlacementError, match=f"{later} does not exist on"):
        await retry.prepare()
    later.mkdir()
    await retry.prepare()
    assert await retry.write_text("x.txt", "x") == str(later / "x.txt")
    await retry.close()


async def test_an_unknown_host_key_is_refused(sshd: Sshd, target_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    options = PlacementOptions(
        ssh_target=f"{sshd.user}@127.0.0.1:{sshd.port}", ssh_dir=str(target_dir),
        ssh_key_file=sshd.key, ssh_known_hosts=str(empty), ssh_connect_timeout=5.0,
    )  # fmt: skip
    placement = make_placement("ssh", root="/r", session_id="s1", options=options)
    with pytest.raises(PlacementError, match=r"cannot connect to ssh target .*: Host key is not trusted"):
        await placement.prepare()
    unchecked = make_placement(
        "ssh", root="/r", session_id="s1",
        options=PlacementOptions(
            ssh_target=options.ssh_target, ssh_dir=str(target_dir), ssh_key_file=sshd.key,
            ssh_verify_host_key=False, ssh_connect_timeout=5.0,
        ),
    )  # fmt: skip
    await unchecked.prepare()
    await unchecked.close()


@pytest.mark.parametrize("reconnect_first", [True, False])
async def test_a_dropped_connection_is_opened_again_and_leaves_no_process(
    placement: SshPlacement, reconnect_first: bool
) -> None:
    tid = await placement.create_terminal("sleep", ["60"], {}, None, None)
    pid = placement.terminals.get(tid).process.pid
    assert placement._connection is not None
    placement._connection.close()
    await asyncio.wait_for(placement._connection.wait_closed(), 10)
    # The command's end is seen (the connection is gone), not waited for forever.
    assert await asyncio.wait_for(placement.wait_for_terminal_exit(tid), 10) == (255, None)
    if reconnect_first:
        await placement.prepare()
        assert await placement.read_text("hello.txt") == "hi\n"
        await placement.release_terminal(tid)  # killed over the new connection
    else:
        assert await placement.close() is None  # connects again just to kill it
    assert await gone(pid)
