"""What a placement is: where a session's files and commands land.

Plain Python, no ACP or JSON-RPC types: the core calls these methods from
its fs and terminal handlers and turns a `PlacementError` into the error the
agent sees (its message is a sentence meant for the agent and the user).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from sessiond.daemon import confine, terminals

KINDS = ("here", "worktree", "sandbox", "container", "ssh")

# What terminal_output returns: output, truncated, exit code, signal name.
TerminalOutput = tuple[str, bool, int | None, str | None]
T = TypeVar("T")  # what a function run on a Machine returns


class PlacementError(Exception):
    """A placement could not do what was asked; the message says what and what to do."""


class PathOutsideRoot(PlacementError, confine.PathOutsideRoot):
    """A path that resolves outside the session's root (`..`, elsewhere, a symlink pointing out).

    Also a `confine.PathOutsideRoot`, so handlers written for the old check still catch it.
    """


class UnknownTerminal(PlacementError, terminals.TerminalNotFound):
    """A terminal id this placement does not hold (never created, or released already)."""


class MachineUnreachable(PlacementError):
    """The machine a placement's files are on cannot be reached (its Ray node is gone)."""


class Machine(Protocol):
    """The machine an agent's process runs on, as a placement whose files are made there uses it
    (a worktree made from a repository): plain functions of ours, run there on its files."""

    @property
    def id(self) -> str:
        """The same machine, the same id (a Ray node's id; "local" for this one)."""

    @property
    def name(self) -> str | None:
        """A sentence's worth (the node and its address); None for this machine."""

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` run there: what it returns, or the PlacementError it raised (its
        sentence kept); MachineUnreachable when the machine is gone."""


# Options once stored and now ignored: sessions opened before keep working.
# sandbox_unshare_net: no network is the sandbox's default now (sandbox_network turns it on).
RETIRED = frozenset({"sandbox_unshare_net"})


def present_dirs(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The real paths of those of `paths` that are directories now, without `/`, each once."""
    real = (os.path.realpath(path) for path in paths)
    return tuple(dict.fromkeys(path for path in real if path != "/" and os.path.isdir(path)))


def is_within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or under it (both absolute and normalised)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True)
class PlacementOptions:
    """The settings of a placement; each kind reads its own and ignores the rest."""

    # worktree: the ref the session's branch starts from; None is the HEAD of the root's repository
    # (of `repository`, its default branch).
    base: str | None = None
    # worktree: a repository cloned where the agent runs (a Ray node, or here) instead of the root's;
    # the folder there holding the clone and the worktrees (None: ~/.cache/sessiond/checkouts).
    repository: str | None = None
    checkout_dir: str | None = None
    # sandbox: more paths bound at their own path, read-write or read-only; and whether its
    # commands may reach the network (off by default: no network, not even the daemon's TCP port).
    sandbox_rw_binds: tuple[str, ...] = ()
    sandbox_ro_binds: tuple[str, ...] = ()
    sandbox_network: bool = False
    # container: "docker" or "podman"; None takes the first whose `info` works. Its network is
    # off (`--network none`) unless container_network, or container_run_args name one.
    container_engine: str | None = None
    container_image: str | None = None
    container_run_args: tuple[str, ...] = ()
    container_network: bool = False
    # ssh: `user@host[:port]`; the directory on the target (None: the session root's own path);
    # a key file (None: the user's keys and agent); a known_hosts file (None: the user's, as
    # their ssh config says); host key checking can be turned off (tests, throwaway hosts).
    ssh_target: str | None = None
    ssh_dir: str | None = None
    ssh_key_file: str | None = None
    ssh_known_hosts: str | None = None
    ssh_verify_host_key: bool = True
    ssh_connect_timeout: float = 15.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> PlacementOptions:
        """Options from stored or configured values (snake_case keys); unknown keys are refused."""
        if not values:
            return _DEFAULT_OPTIONS  # (frozen: one for every session that sets none)
        fields = _option_names()
        values = {key: value for key, value in values.items() if key not in RETIRED}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise PlacementError(
                f"unknown placement option(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}"
            )
        converted: dict[str, Any] = {
            key: tuple(value) if isinstance(value, list) else value for key, value in values.items()
        }
        return cls(**converted)

    def to_mapping(self) -> dict[str, Any]:
        """The options that differ from the defaults, as plain JSON-able values."""
        defaults = PlacementOptions()
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(defaults, f.name)
        }


_DEFAULT_OPTIONS = PlacementOptions()


@functools.cache
def _option_names() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(PlacementOptions))


@runtime_checkable
class Placement(Protocol):
    kind: str
    # The directory the agent is told to work in (cwd of session/new). For a worktree it is
    # known once prepare() has run; for ssh it is a path on the target.
    root: str
    # None for this machine; "user@host:port" for an ssh target (a file's identity is host + path).
    host: str | None

    async def prepare(self) -> None:
        """Make the placement ready; cheap when it is. Raises PlacementError; may be called again."""

    async def run_commands_with(self, terminals: terminals.Terminals) -> bool:
        """The agent's commands start through `terminals` from now on (its process runs on another
        node, and they go there too), ending those started through the earlier ones; False where
        the placement itself decides where commands run (a sandbox, a container, an ssh target)."""

    async def read_text(self, path: str) -> str: ...

    async def write_text(self, path: str, content: str) -> str:
        """Write (creating parent directories); returns the real path written, for collision checks."""
        ...

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str: ...

    async def terminal_output(self, terminal_id: str) -> TerminalOutput: ...

    async def wait_for_terminal_exit(self, terminal_id: str) -> tuple[int | None, str | None]: ...

    async def kill_terminal(self, terminal_id: str) -> None: ...

    async def release_terminal(self, terminal_id: str) -> None: ...

    async def close(self) -> str | None:
        """The session is closed: kill terminals, tear down; a sentence when something was kept, and why."""
        ...

    async def stop(self) -> None:
        """The daemon stops or the agent goes: kill terminals, take down what runs (container,
        connection), keep the work (a worktree stays); the next prepare() brings it back."""
        ...

    def describe(self) -> str:
        """Where the session runs, in a few words (for "where it runs")."""
        ...
