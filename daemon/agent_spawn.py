"""Starting an agent's process, without the ACP SDK: the daemon starts the process while the
SDK is still being imported, so the agent's own start-up and the daemon's import overlap
(each takes most of a first turn).

`AgentProc` is what the ACP side needs of a running agent process, wherever it runs: its pipes,
its exit, signals for it and what it started. `LocalProc` is one on this machine; a Ray-run
agent's is `ray_runner.RayProc`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sessiond.daemon.agent_types import AgentExited
from sessiond.daemon.placements.base import Machine
from sessiond.daemon.placements.repository import LOCAL
from sessiond.protocol.models import RaySettings

if TYPE_CHECKING:
    from sessiond.daemon.terminals import Terminals

STDOUT_LIMIT = 50 * 1024 * 1024  # the longest line (one ACP message) read off an agent's stdout


class Stdin(Protocol):
    """What is written to an agent (what the ACP SDK and the stop use of an asyncio StreamWriter)."""

    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def close(self) -> None: ...


class AgentProc(Protocol):
    """A started agent process, wherever it runs."""

    @property
    def pid(self) -> int | None: ...
    @property
    def stdin(self) -> Stdin: ...
    @property
    def stdout(self) -> asyncio.StreamReader: ...
    @property
    def node(self) -> str | None:
        """Where it runs when not on this machine (a sentence's worth: the node and its address)."""

    @property
    def lost(self) -> str | None:
        """Why it ended when it did not exit on its own (the node it ran on went away)."""

    async def wait(self) -> int: ...
    def signal(self, sig: int) -> None:
        """Send `sig` to it and what it started (its process group)."""

    async def root_problem(self, root: str) -> str | None:
        """Why a session rooted at `root` cannot work where the process runs (None: it can)."""

    def terminals(self) -> Terminals | None:
        """Terminals whose commands run where the process runs, for a session opened there; None:
        the session's placement runs them (on this machine, or its ssh target)."""

    def machine(self) -> Machine:
        """The machine it runs on, for a placement made there (a worktree of a repository)."""

    def memory(self) -> int | None:
        """Resident bytes of the process and its children (None: not known)."""


class LocalProc:
    """An agent process on this machine, in a process group of its own."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.stdin: Stdin = proc.stdin
        self.stdout: asyncio.StreamReader = proc.stdout
        self.node: str | None = None
        self.lost: str | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    async def wait(self) -> int:
        return await self._proc.wait()

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    async def root_problem(self, root: str) -> str | None:
        return None  # this machine's roots are its placements' to make

    def terminals(self) -> Terminals | None:
        return None

    def machine(self) -> Machine:
        return LOCAL

    def memory(self) -> int | None:
        return tree_rss(self._proc.pid)


@dataclass(frozen=True, slots=True)
class Spawned:
    """A started agent process, before anyone has spoken ACP to it."""

    proc: AgentProc
    environment: dict[str, str]  # what it was started with (its env_var auth methods read it)
    started_at: float


async def spawn_agent(name: str, command: list[str], environment: dict[str, str], log_path: Path) -> Spawned:
    """Start `command` in a session of its own, its stderr appended to `log_path`; raises
    AgentExited saying what to do when it cannot be started."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The agent's stderr goes straight to its log file: nothing to drain, nothing to block on.
    with open(log_path, "ab") as stderr:
        stderr.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {command}\n".encode())
        stderr.flush()
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=environment,
                start_new_session=True,
                limit=STDOUT_LIMIT,
            )
        except OSError as exc:
            raise AgentExited(
                f"could not start agent {name!r} with {command!r}: {exc.strerror or exc}; "
                f"check the agent's command (in agents.toml, or agent/update)"
            ) from None
    return Spawned(LocalProc(proc), environment, time.time())


PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(pid: int) -> int | None:
    """Resident bytes of `pid` and its descendants, from /proc (None where there is no /proc or
    the process is gone). A few small reads per process: cheap enough to answer agent/get with."""
    total, seen, todo = 0, set(), [pid]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with open(f"/proc/{current}/statm") as statm:
                total += int(statm.read().split()[1]) * PAGE
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except (OSError, ValueError, IndexError):
            if current == pid:
                return None
    return total


def ray_request(settings: RaySettings) -> str:
    """What a Ray-run agent's process asks of a node: 'CPU=1, gpu-box=1, memory=… bytes'."""
    asked = ", ".join(
        f"{key}={value:g}" for key, value in {"CPU": settings.num_cpus, **settings.resources}.items()
    )
    if settings.memory is not None:
        asked += f", memory={settings.memory} bytes"
    return asked


def kill(proc: AgentProc) -> None:
    """Kill it and what it started, at once."""
    proc.signal(signal.SIGKILL)
