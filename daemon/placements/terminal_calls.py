"""The agent's terminal calls, answered from a `Terminals` (local or remote): one copy for all placements."""

from __future__ import annotations

from sessiond.daemon.placements.base import TerminalOutput, UnknownTerminal
from sessiond.daemon.terminals import Terminal, TerminalNotFound, Terminals


class TerminalCalls:
    terminals: Terminals

    def terminal(self, terminal_id: str) -> Terminal:
        try:
            return self.terminals.get(terminal_id)
        except TerminalNotFound as exc:
            raise UnknownTerminal(str(exc)) from None

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        terminal = self.terminal(terminal_id)
        return terminal.text(), terminal.truncated, terminal.exit_code, terminal.signal

    async def wait_for_terminal_exit(self, terminal_id: str) -> tuple[int | None, str | None]:
        terminal = self.terminal(terminal_id)
        await terminal.exited.wait()
        return terminal.exit_code, terminal.signal

    async def kill_terminal(self, terminal_id: str) -> None:
        self.terminal(terminal_id)
        await self.terminals.kill(terminal_id)

    async def release_terminal(self, terminal_id: str) -> None:
        await self.terminals.release(terminal_id)
