"""`worktree` with `repository`: a worktree of a repository the session names, made where the
agent runs (a Ray node, or this machine), not beside a root of this machine.

The daemon holds the session; the files are on the agent's machine (`Machine`), and everything
that touches them runs there (`checkout.py`, by `Machine.call`): making the worktree on the
first turn, the agent's fs reads and writes, the folder a command starts in, counting the changed
files, pushing the session's branch, removing the worktree. Commands run there through the
terminals of the agent's process (`run_commands_with`).

The worktree is made once the agent's process is known (`make_at`, by the core, before the
session opens there). Should the process later run on another machine (its node was lost, or it
started again elsewhere), the worktree follows it: the work is pushed from the old machine as the
session's branch and checked out on the new one; an old machine that cannot be reached keeps
what it had, and the turn's notice says what the new worktree was made from.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sessiond.daemon import terminals as terminal_kinds
from sessiond.daemon.placements import checkout
from sessiond.daemon.placements.base import Machine, MachineUnreachable, PlacementError, PlacementOptions
from sessiond.daemon.placements.local import start_command
from sessiond.daemon.placements.terminal_calls import TerminalCalls
from sessiond.daemon.terminals import Terminals
from sessiond.protocol import models as m

T = TypeVar("T")


def _name(machine: Machine) -> str:
    """'Ray node 6f47a253bcfe (10.0.0.7)', or 'this machine'."""
    return machine.name or "this machine"


def where(machine: Machine) -> str:
    """'on Ray node 6f47a253bcfe (10.0.0.7)', or 'on this machine'."""
    return f"on {_name(machine)}"


@dataclass(frozen=True)
class Checkout:
    """A session's worktree as made on its machine (what `checkout.check_out` answers)."""

    worktree: str
    branch: str
    base_branch: str | None  # the repository's branch the work merges back into (None: from a commit)
    base_commit: str  # the commit the session's branch started from
    base_tree: str  # its tree: what the changed files are counted against, on any machine
    made: str  # kept (there already), branch, pushed (the session's branch fetched back), base

    @classmethod
    def of(cls, values: dict[str, Any]) -> Checkout:
        return cls(**values)


class WorktreeChanges:
    """The session's changed files, counted where the worktree is (a `changes.CountsChanges`)."""

    def __init__(self, placement: RepositoryPlacement) -> None:
        self._placement = placement

    @property
    def base(self) -> str | None:
        made = self._placement.made
        return made.base_tree if made is not None else None

    async def changes(self, extra: list[tuple[str, str | None, str]] | None = None) -> m.Changes:
        machine, made = self._placement.at()
        counted = await machine.call(checkout.changes, made.worktree, made.base_tree, extra or [])
        return m.Changes.model_validate(counted)


class RepositoryPlacement(TerminalCalls):
    kind = "worktree"

    def __init__(self, *, root: str, session_id: str, options: PlacementOptions) -> None:
        if not options.repository:
            raise PlacementError("a worktree of a repository needs the repository")
        self.repository = options.repository
        self.session_id = session_id
        self.options = options
        self.branch = checkout.BRANCH_PREFIX + session_id
        self.root = root  # the repository, until the worktree is made: then its path there
        self.host: str | None = None  # the machine it is made on, when not this one
        self.terminals = Terminals()
        self.machine: Machine | None = None
        self.made: Checkout | None = None

    @property
    def worktree(self) -> str | None:
        return self.made.worktree if self.made is not None else None

    def describe(self) -> str:
        if self.made is None or self.machine is None:
            return f"worktree of {self.repository} (made where the agent runs, on the first turn)"
        return (
            f"worktree {self.made.worktree} of {self.repository} {where(self.machine)}, branch {self.branch}"
        )

    def at(self) -> tuple[Machine, Checkout]:
        """Its machine and worktree; PlacementError before the first turn made them."""
        if self.machine is None or self.made is None:
            raise PlacementError(
                "the session has no worktree yet: it is made where its agent runs, on its next turn"
            )
        return self.machine, self.made

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        machine, _ = self.at()
        return await machine.call(function, *args)

    # ------------------------------------------------------------ being made

    async def prepare(self) -> None:
        """Nothing before the agent's process is known: `make_at` makes the worktree there."""

    async def make_at(self, machine: Machine) -> str | None:
        """The worktree on `machine`, where the agent's process runs, made or moved there (cheap when
        it is there already); what a person should know of a move, or None."""
        if self.made is not None and self.machine is not None and self.machine.id == machine.id:
            return None
        earlier = self.made
        moved_from = self.machine if earlier is not None else None
        lost = await self._take_along(moved_from, earlier) if moved_from and earlier else None
        started = (earlier.base_branch, earlier.base_commit) if earlier is not None else None
        made = Checkout.of(
            await machine.call(
                checkout.check_out,
                self.repository,
                self.options.checkout_dir,
                self.session_id,
                self.options.base,
                started,
                where(machine),
            )
        )
        self.machine, self.made = machine, made
        self.root, self.host = made.worktree, machine.name
        return None if moved_from is None else self._moved(moved_from, machine, made, lost)

    async def _take_along(self, old: Machine, made: Checkout) -> str | None:
        """The work on `old` pushed as the session's branch, and its worktree there removed; why the
        work could not be taken along, or None."""
        try:
            await old.call(
                checkout.push, made.worktree, self.branch, self.session_id, self.repository, where(old)
            )
        except PlacementError as exc:
            return str(exc)
        with contextlib.suppress(PlacementError):  # pushed: what stays there is a copy
            await old.call(checkout.remove, made.worktree, self.branch)
        return None

    def _moved(self, old: Machine, new: Machine, made: Checkout, lost: str | None) -> str:
        """What a person should know of the worktree's move from `old` to `new`."""
        if lost is None:
            return (
                f"the session's worktree moved from {_name(old)} to {_name(new)} with its work (pushed as "
                f"branch {self.branch} of {self.repository} and checked out there)"
            )
        taken = f"the session's worktree was {where(old)}, and its work could not be taken along ({lost})"
        if made.made == "kept":
            return f"{taken}; {_name(new)} has it at the same path, as it was (they share it)"
        start = (
            f"its branch {self.branch} as last pushed"
            if made.made == "pushed"
            else f"{made.base_branch or 'commit'} at {made.base_commit[:12]}"
        )
        return (
            f"{taken}: a new worktree of {self.repository} was made {where(new)} from {start}, without what "
            f"was not pushed before"
        )

    async def run_commands_with(self, terminals: terminal_kinds.Terminals) -> bool:
        earlier, self.terminals = self.terminals, terminals
        await earlier.close()
        return True

    # ------------------------------------------------------------ files and commands, there

    async def read_text(self, path: str) -> str:
        return await self._call(checkout.read_text, self.at()[1].worktree, path)

    async def write_text(self, path: str, content: str) -> str:
        return await self._call(checkout.write_text, self.at()[1].worktree, path, content)

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        directory = await self._call(checkout.directory, self.at()[1].worktree, cwd)
        return await start_command(
            self.terminals, command, [command, *args], env, directory, output_byte_limit
        )

    def tracker(self) -> WorktreeChanges:
        return WorktreeChanges(self)

    # ------------------------------------------------------------ merging

    async def push(self) -> str:
        """Commits what is pending there and pushes the session's branch; the commit pushed."""
        machine, made = self.at()
        return await machine.call(
            checkout.push, made.worktree, self.branch, self.session_id, self.repository, where(machine)
        )

    async def follow(self, expected: str, commit: str) -> bool:
        """After a merge that kept the branch: the worktree moves to the merged commit."""
        machine, made = self.at()
        return await machine.call(checkout.follow, made.worktree, self.branch, expected, commit)

    async def merged(self) -> None:
        """After a merge that removed the branch: the worktree goes too; the next turn makes a new
        one from the base as it is now."""
        machine, made = self.at()
        await self.terminals.close()
        await machine.call(checkout.remove, made.worktree, self.branch)
        self.made = None
        self.root, self.host = self.repository, None

    # ------------------------------------------------------------ closing

    async def close(self) -> str | None:
        await self.terminals.close()
        if self.made is None or self.machine is None:
            return None  # never made (or not since the daemon started: see docs/scale.md)
        machine, made = self.machine, self.made
        try:
            kept = await machine.call(
                checkout.retire,
                made.worktree,
                self.branch,
                self.session_id,
                self.repository,
                (made.base_branch, made.base_commit),
                where(machine),
            )
        except MachineUnreachable as exc:
            return f"the session's worktree {made.worktree} could not be removed: {exc}"
        except PlacementError as exc:
            return f"worktree kept at {made.worktree} {where(machine)}: {exc}"
        self.made = None
        return str(kept) if kept else None

    async def stop(self) -> None:
        await self.terminals.close()


class LocalMachine:
    """This machine, for an agent run here: the functions run in a thread (they block on git)."""

    id = "local"
    name: str | None = None

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(function, *args)


LOCAL = LocalMachine()
