"""Starting an agent's process, without the ACP SDK: the daemon starts the process while the
SDK is still being imported, so the agent's own start-up and the daemon's import overlap
(each takes most of a first turn)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from sessiond.daemon.agent_types import AgentExited

STDOUT_LIMIT = 50 * 1024 * 1024  # the longest line (one ACP message) read off an agent's stdout


@dataclass(frozen=True, slots=True)
class Spawned:
    """A started agent process, before anyone has spoken ACP to it."""

    proc: asyncio.subprocess.Process
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
                f"check the agent's command (sessiond agent update)"
            ) from None
    return Spawned(proc, environment, time.time())
