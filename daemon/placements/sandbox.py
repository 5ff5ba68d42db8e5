"""`sandbox`: each command runs under bubblewrap.

The project directory is bound read-write at its own path and the rest of
the system read-only, so a command finds the machine's tools but can change
only the project. Files are read and written directly (the same paths), as
for `here`. Nothing stays up between commands: each terminal is its own
`bwrap`, started with --die-with-parent so it cannot outlive the daemon.

A command must not reach the daemon that runs it: its socket, state (the
store, `session-secret`, `tcp-token`) and config folders are empty tmpfs
inside, it sees only its own processes (a /proc of its own: not the daemon's
environment, open files or root), it has no network unless the session asks
(so not the daemon's TCP port or MCP endpoint either), and when the daemon
runs as root bwrap is told to drop root's capabilities, which it otherwise
keeps (and with them the power to unmount what hides the daemon).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import PurePosixPath

from sessiond.daemon.placements.base import PlacementError, PlacementOptions, present_dirs
from sessiond.daemon.placements.local import LocalPlacement
from sessiond.daemon.terminals import Terminals

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install bubblewrap`) "
    "or open the session with placement here"
)


def bwrap_argv(
    root: str,
    cwd: str,
    command: str,
    args: list[str],
    *,
    rw_binds: tuple[str, ...] = (),
    ro_binds: tuple[str, ...] = (),
    hide: tuple[str, ...] = (),
    network: bool = False,
    drop_caps: bool = False,
    bwrap: str = "bwrap",
) -> list[str]:
    """The bwrap command line that runs `command` confined to `root`, with the folders `hide` empty.

    bwrap applies mounts in order, each over what is already at its path, so they
    are sorted by depth, shallowest first (the sort is stable): the private /tmp
    before a project under /tmp, a hidden folder before a project inside it and
    after a project that holds it. At one path the later kind wins: the project
    and explicit binds over a hidden folder.
    """
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    mounts = [("/tmp", ["--tmpfs", "/tmp"])]
    mounts += [(path, ["--tmpfs", path]) for path in hide]
    mounts += [(root, ["--bind", root, root])]
    mounts += [(path, ["--bind", path, path]) for path in rw_binds]
    mounts += [(path, ["--ro-bind", path, path]) for path in ro_binds]
    for _, words in sorted(mounts, key=lambda mount: len(PurePosixPath(mount[0]).parts)):
        argv += words
    # A pid namespace: the /proc above shows the command's own processes, not the daemon's.
    argv += ["--unshare-pid"]
    if not network:
        argv += ["--unshare-net"]
    if drop_caps:
        argv += ["--cap-drop", "ALL"]
    argv += ["--die-with-parent", "--chdir", cwd, "--", command, *args]
    return argv


class SandboxPlacement(LocalPlacement):
    kind = "sandbox"

    _bwrap: str | None = None

    def __init__(
        self, *, root: str, session_id: str, options: PlacementOptions, daemon_dirs: tuple[str, ...] = ()
    ) -> None:
        super().__init__(root=root, session_id=session_id, options=options)
        # The daemon's socket, state and config folders: empty inside.
        self.daemon_dirs = daemon_dirs

    async def run_commands_with(self, terminals: Terminals) -> bool:
        return False  # the sandbox is set up on this machine: its commands run here

    def describe(self) -> str:
        network = "" if self.options.sandbox_network else ", no network"
        return f"sandbox (bubblewrap), {self.root} writable, the rest read-only{network}"

    async def prepare(self) -> None:
        await super().prepare()
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise PlacementError(f"the sandbox needs bubblewrap, and `bwrap` is not on PATH: {INSTALL_HINT}")
        # A probe: bwrap can be installed yet refused (user namespaces off, a seccomp'd container).
        real = os.path.realpath(self.root)
        probe = await asyncio.create_subprocess_exec(
            *self._argv(bwrap, real, "true", []),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await probe.communicate()
        if probe.returncode != 0:
            reason = err.decode(errors="replace").strip() or f"exit code {probe.returncode}"
            raise PlacementError(f"bubblewrap cannot start a sandbox here: {reason}")
        self._bwrap = bwrap

    def _argv(self, bwrap: str, cwd: str, command: str, args: list[str]) -> list[str]:
        return bwrap_argv(
            os.path.realpath(self.root),
            cwd,
            command,
            args,
            rw_binds=self.options.sandbox_rw_binds,
            ro_binds=self.options.sandbox_ro_binds,
            # Looked at per command: a folder made after the session started is hidden too.
            hide=present_dirs(self.daemon_dirs),
            network=self.options.sandbox_network,
            # As root bwrap keeps every capability unless told: the command could unmount the tmpfs.
            drop_caps=os.geteuid() == 0,
            bwrap=bwrap,
        )

    def command_line(self, command: str, args: list[str], env: dict[str, str], cwd: str) -> list[str]:
        if self._bwrap is None:
            raise PlacementError("the sandbox is not up yet: its first turn brings it up")
        # Inside, a missing command is only bwrap's exit 1 with a message: say it plainly, as `here` does.
        if (
            os.sep not in command
            and shutil.which(command, path=env.get("PATH", os.environ.get("PATH"))) is None
        ):
            raise PlacementError(f"command not found: {command!r}")
        return self._argv(self._bwrap, cwd, command, args)
