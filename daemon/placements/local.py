"""`here`: the session's root itself, on this machine.

It is also the base of the placements whose files are this machine's files
at the same paths (worktree, sandbox, container): they differ only in how
they get ready, how a command is started, and how they end.
"""

from __future__ import annotations

import asyncio
import os

from sessiond.daemon import confine
from sessiond.daemon.placements.base import (
    PathOutsideRoot,
    PlacementError,
    PlacementOptions,
)
from sessiond.daemon.placements.terminal_calls import TerminalCalls
from sessiond.daemon.terminals import Terminals


def read_local(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise PlacementError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise PlacementError(f"{path} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise PlacementError(f"{path} is not UTF-8 text") from None


def write_local(path: str, content: str) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
    except IsADirectoryError:
        raise PlacementError(f"{path} is a directory, not a file") from None
    except (NotADirectoryError, FileExistsError):
        raise PlacementError(f"cannot write {path}: a parent of it is a file, not a directory") from None
    except PermissionError as exc:
        raise PlacementError(f"cannot write {path}: {exc.strerror}") from None


async def start_command(
    terminals: Terminals, command: str, argv: list[str], env: dict[str, str], cwd: str, limit: int | None
) -> str:
    """Starts `argv` (which runs the agent's `command`) as one of `terminals`; its id."""
    program, *rest = argv
    try:
        return await terminals.create(program, rest, env, cwd, limit)
    except FileNotFoundError:
        raise PlacementError(f"command not found: {command!r}") from None
    except PermissionError:
        raise PlacementError(f"command {command!r} is not executable") from None


class LocalPlacement(TerminalCalls):
    kind = "here"
    host: str | None = None

    def __init__(self, *, root: str, session_id: str, options: PlacementOptions) -> None:
        self.root = root
        self.session_id = session_id
        self.options = options
        self.terminals = Terminals()

    async def run_commands_with(self, terminals: Terminals) -> bool:
        # A folder (or a worktree) on a filesystem the agent's node shares: its commands go there.
        earlier, self.terminals = self.terminals, terminals
        await earlier.close()
        return True

    async def prepare(self) -> None:
        if not os.path.isdir(self.root):
            raise PlacementError(f"the session's root {self.root} is not an existing directory")

    def describe(self) -> str:
        return f"here, in {self.root}"

    def resolve(self, path: str) -> str:
        """The real path of `path` under the root, or PathOutsideRoot."""
        try:
            return confine.resolve_inside(self.root, path)
        except confine.PathOutsideRoot as exc:
            raise PathOutsideRoot(str(exc)) from None

    async def read_text(self, path: str) -> str:
        # Threads: a large file or a slow disk must not stall every other session.
        return await asyncio.to_thread(read_local, self.resolve(path))

    async def write_text(self, path: str, content: str) -> str:
        real = self.resolve(path)
        await asyncio.to_thread(write_local, real, content)
        return real

    # ------------------------------------------------------------ terminals

    def command_line(self, command: str, args: list[str], env: dict[str, str], cwd: str) -> list[str]:
        """The program and arguments that run `command` at this placement (here: itself)."""
        return [command, *args]

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        directory = self.resolve(cwd) if cwd else os.path.realpath(self.root)
        program, *rest = self.command_line(command, args, env, directory)
        return await start_command(
            self.terminals, command, [program, *rest], env, directory, output_byte_limit
        )

    async def close(self) -> str | None:
        await self.terminals.close()
        return None

    async def stop(self) -> None:
        # Nothing runs between commands here (nor in a sandbox or worktree): only the terminals.
        await self.terminals.close()
