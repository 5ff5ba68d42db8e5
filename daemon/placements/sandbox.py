"""`sandbox`: each command runs under bubblewrap.

The project directory is bound read-write at its own path and the rest of
the system read-only, so a command finds the machine's tools but can change
only the project. Files are read and written directly (the same paths), as
for `here`. Nothing stays up between commands: each terminal is its own
`bwrap`, started with --die-with-parent so it cannot outlive the daemon.
"""

from __future__ import annotations

import asyncio
import os
import shutil

from sessiond.daemon.placements.base import PlacementError
from sessiond.daemon.placements.local import LocalPlacement

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
    unshare_net: bool = False,
    bwrap: str = "bwrap",
) -> list[str]:
    """The bwrap command line that runs `command` confined to `root`.

    Mounts apply in order: the private /tmp comes before the project's bind,
    or a project under /tmp would be hidden by it.
    """
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    argv += ["--bind", root, root]
    for path in rw_binds:
        argv += ["--bind", path, path]
    for path in ro_binds:
        argv += ["--ro-bind", path, path]
    if unshare_net:
        argv += ["--unshare-net"]
    argv += ["--die-with-parent", "--chdir", cwd, "--", command, *args]
    return argv


class SandboxPlacement(LocalPlacement):
    kind = "sandbox"

    _bwrap: str | None = None

    def describe(self) -> str:
        return f"sandbox (bubblewrap), {self.root} writable, the rest read-only"

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
            unshare_net=self.options.sandbox_unshare_net,
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
