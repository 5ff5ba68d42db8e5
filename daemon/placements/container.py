"""`container`: a container apiece (docker or podman), commands run in it with exec.

Brought up on the first turn from the configured image, as the calling user,
with the project directory bound at its own path (and the daemon's own
folders, should the project hold one, covered by an empty tmpfs), without
network unless the session asks, kept alive by `sleep infinity`, and removed
(`rm -f`) when the session closes. Files are read and
written directly, as for `here`: they are the same files.

Killing a command means killing it inside the container: stopping the
`docker exec` client leaves the process running there. So each command
first writes its pid to a file in the container's /tmp, and a kill execs
`kill` on that pid's group.

The command lines are pure functions, tested on their own; no engine runs on
the project's machines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import uuid

from sessiond.daemon.child_env import child_environment
from sessiond.daemon.placements.base import PlacementError, PlacementOptions, is_within, present_dirs
from sessiond.daemon.placements.local import LocalPlacement
from sessiond.daemon.terminals import Terminals

ENGINES = ("docker", "podman")
INFO_TIMEOUT = 20.0
RUN_TIMEOUT = 300.0  # an image pull may take a while


def info_argv(engine: str) -> list[str]:
    return [engine, "info"]


def run_argv(
    engine: str,
    *,
    name: str,
    image: str,
    root: str,
    uid: int,
    gid: int,
    session_id: str,
    extra: tuple[str, ...] = (),
    hide: tuple[str, ...] = (),
    network: bool = False,
) -> list[str]:
    """`run` of the session's container: `root` mounted, the folders of `hide` under it empty.

    Only the root is mounted, so only a hidden folder inside it needs covering (the
    engine mounts the deeper path last). No network unless asked, or `extra` names one.
    """
    argv = [engine, "run", "-d", "--rm", "--name", name, "--label", f"sessiond.session={session_id}"]
    argv += ["--user", f"{uid}:{gid}"]
    if os.path.basename(engine) == "podman" and uid != 0:
        # Rootless podman maps the user to root inside unless told to keep the id, and the
        # files the commands write would belong to a subordinate uid on the host.
        argv += ["--userns=keep-id"]
    if not network and not any(arg.split("=")[0] in ("--network", "--net") for arg in extra):
        argv += ["--network", "none"]
    argv += ["-v", f"{root}:{root}"]
    for path in hide:
        if path != root and is_within(path, root):
            argv += ["--tmpfs", path]
    argv += ["-w", root, *extra, image, "sleep", "infinity"]
    return argv


def exec_argv(
    engine: str,
    container: str,
    *,
    cwd: str,
    env: dict[str, str],
    command: str,
    args: list[str],
    pidfile: str,
) -> list[str]:
    argv = [engine, "exec", "-w", cwd]
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    # sh records the pid, then becomes the command ($0 and $@ carry it unquoted-safe).
    script = f'echo $$ > {shlex.quote(pidfile)}; exec "$0" "$@"'
    return [*argv, container, "sh", "-c", script, command, *args]


def kill_argv(engine: str, container: str, pidfile: str) -> list[str]:
    quoted = shlex.quote(pidfile)
    script = (
        f"p=$(cat {quoted} 2>/dev/null) || exit 0; "
        'kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; '
        f"rm -f {quoted}"
    )
    return [engine, "exec", container, "sh", "-c", script]


def rm_argv(engine: str, container: str) -> list[str]:
    return [engine, "rm", "-f", container]


async def run(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run a CLI command to its end: exit code, stdout, stderr (127 if the program is missing)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=child_environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not installed"
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        return 124, "", f"{' '.join(argv[:2])} did not answer within {timeout:.0f} s"
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _tail(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "; ".join(lines[-3:])[:400] or "no message"


async def find_engine(preferred: str | None = None) -> str:
    """The first engine whose `info` works, or PlacementError saying why each failed."""
    reasons = []
    for engine in [preferred] if preferred else ENGINES:
        path = shutil.which(engine)
        if path is None:
            reasons.append(f"{engine}: not installed")
            continue
        code, _, err = await run(info_argv(path), INFO_TIMEOUT)
        if code == 0:
            return path
        reasons.append(f"{engine} info failed: {_tail(err)}")
    raise PlacementError(f"no container engine works here: {'; '.join(reasons)}")


class ContainerPlacement(LocalPlacement):
    kind = "container"

    def __init__(
        self, *, root: str, session_id: str, options: PlacementOptions, daemon_dirs: tuple[str, ...] = ()
    ) -> None:
        super().__init__(root=root, session_id=session_id, options=options)
        # The daemon's socket, state and config folders: empty inside, should the root hold one.
        self.daemon_dirs = daemon_dirs
        if not options.container_image:
            raise PlacementError("placement container needs an image (the agent's container_image)")
        if options.container_engine not in (None, *ENGINES):
            raise PlacementError(
                f"container engine {options.container_engine!r} is not one of {', '.join(ENGINES)}"
            )
        self.image = options.container_image
        self.engine: str | None = None
        self.container: str | None = None
        self._pidfiles: dict[str, str] = {}

    async def run_commands_with(self, terminals: Terminals) -> bool:
        return False  # the container runs on this machine: its commands run here

    def describe(self) -> str:
        engine = os.path.basename(self.engine) if self.engine else "container"
        return f"{engine} container of {self.image}, {self.root} mounted"

    async def prepare(self) -> None:
        await super().prepare()
        if self.engine and self.container and await self._running(self.engine, self.container):
            return
        engine = await find_engine(self.options.container_engine)
        real = os.path.realpath(self.root)
        # A fresh name each time: a retry or a second daemon never trips over another's container.
        name = f"sessiond-{self.session_id}-{uuid.uuid4().hex[:8]}"
        argv = run_argv(
            engine,
            name=name,
            image=self.image,
            root=real,
            uid=os.getuid(),
            gid=os.getgid(),
            session_id=self.session_id,
            extra=self.options.container_run_args,
            hide=present_dirs(self.daemon_dirs),
            network=self.options.container_network,
        )
        code, out, err = await run(argv, RUN_TIMEOUT)
        if code != 0:
            raise PlacementError(f"cannot start a container from {self.image}: {_tail(err)}")
        self.engine, self.container = engine, out.strip() or name

    @staticmethod
    async def _running(engine: str, container: str) -> bool:
        code, out, _ = await run([engine, "inspect", "-f", "{{.State.Running}}", container], INFO_TIMEOUT)
        return code == 0 and out.strip() == "true"

    def _up(self) -> tuple[str, str]:
        if self.engine is None or self.container is None:
            raise PlacementError("the container is not up yet: its first turn brings it up")
        return self.engine, self.container

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        engine, container = self._up()
        directory = self.resolve(cwd) if cwd else os.path.realpath(self.root)
        pidfile = f"/tmp/.sessiond-{uuid.uuid4().hex}.pid"
        argv = exec_argv(
            engine, container, cwd=directory, env=env, command=command, args=args, pidfile=pidfile
        )
        # The engine's client gets the daemon's environment; the command only what the agent asked.
        terminal_id = await self.terminals.create(argv[0], argv[1:], {}, directory, output_byte_limit)
        self._pidfiles[terminal_id] = pidfile
        return terminal_id

    async def _kill_inside(self, terminal_id: str) -> None:
        pidfile = self._pidfiles.pop(terminal_id, None)
        if pidfile is None or self.engine is None or self.container is None:
            return
        if not self.terminal(terminal_id).exited.is_set():
            await run(kill_argv(self.engine, self.container, pidfile), INFO_TIMEOUT)

    async def kill_terminal(self, terminal_id: str) -> None:
        self.terminal(terminal_id)
        await self._kill_inside(terminal_id)
        await self.terminals.kill(terminal_id)

    async def release_terminal(self, terminal_id: str) -> None:
        with contextlib.suppress(PlacementError):
            await self._kill_inside(terminal_id)
        await self.terminals.release(terminal_id)

    async def stop(self) -> None:
        # The container holds no work (the project is bind-mounted): stopping is closing.
        await self.close()

    async def close(self) -> str | None:
        # Removing the container ends every command in it; the clients' groups are killed after.
        engine, container = self.engine, self.container
        self.engine = self.container = None
        kept = None
        if engine and container:
            code, _, err = await run(rm_argv(engine, container), INFO_TIMEOUT)
            if code != 0:
                kept = f"container {container} may still be running: {engine} rm -f failed ({_tail(err)})"
        await self.terminals.close()
        self._pidfiles.clear()
        return kept
