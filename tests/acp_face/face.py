"""An editor (the ACP Python SDK's client side) and the `sessiond acp` it spawns, for the tests."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from bench.harness import Daemon

WAIT = 30.0  # generous: two shared cores
NPM_BIN = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin"


def npm_agent(name: str) -> Path:
    """The real agent `name` that `./dev test` installs from npm; the test fails (not skips) without it."""
    path = NPM_BIN / name
    if shutil.which("node") is None or not path.exists():
        pytest.fail(f"{path} is missing: `./dev test` installs it (npm install --prefix tests/interop)")
    return path


class Editor:
    """An ACP client as an editor is one: records every update, answers permissions as told."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []  # (session id, update), in arrival order
        self.raw: list[dict[str, Any]] = []  # every message the agent sent
        self.asked: list[schema.RequestPermissionRequest] = []
        self.answer: Callable[[list[schema.PermissionOption]], asyncio.Future[str | None] | str | None] = (
            lambda options: options[0].option_id
        )
        self.changed = asyncio.Condition()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        async with self.changed:
            self.changed.notify_all()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[schema.PermissionOption], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append(
            schema.RequestPermissionRequest(session_id=session_id, tool_call=tool_call, options=options)
        )
        async with self.changed:
            self.changed.notify_all()
        chosen = self.answer(options)
        if isinstance(chosen, asyncio.Future):
            chosen = await chosen
        if chosen is None:
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def observe(self, event: Any) -> None:
        if event.direction.value == "incoming":
            self.raw.append(event.message)

    def on_connect(self, conn: Any) -> None:
        return None

    async def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
        """Wait until ``check()`` is truthy (re-checked on every update); its value."""
        try:
            async with asyncio.timeout(timeout), self.changed:
                while not (value := check()):
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"not within {timeout} s: {what}") from None
        return value

    def of(self, session_id: str, kind: str | None = None) -> list[Any]:
        return [u for s, u in self.updates if s == session_id and (kind is None or u.session_update == kind)]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(session_id, kind))


@dataclass
class Face:
    conn: Any
    process: asyncio.subprocess.Process
    editor: Editor
    log: Path
    sessions: list[str] = field(default_factory=list)

    async def new(self, cwd: Path) -> str:
        session = await self.conn.new_session(cwd=str(cwd), mcp_servers=[])
        self.sessions.append(session.session_id)
        return str(session.session_id)

    async def prompt(self, session_id: str, text: str, timeout: float = WAIT) -> Any:
        return await asyncio.wait_for(
            self.conn.prompt(session_id=session_id, prompt=[schema.TextContentBlock(type="text", text=text)]),
            timeout,
        )


@contextlib.asynccontextmanager
async def face(
    daemon: Daemon, log_dir: Path, *args: str, editor: Editor | None = None, initialize: bool = True
) -> AsyncIterator[Face]:
    """`sessiond acp ARGS` as an editor spawns it, connected to `daemon`."""
    editor = editor or Editor()
    log = log_dir / f"face-{len(list(log_dir.glob('face-*.log')))}.log"
    with open(log, "wb") as stderr:
        async with acp.spawn_agent_process(
            editor,
            sys.executable,
            "-m",
            "sessiond.client",
            "acp",
            *args,
            env=daemon.env,
            transport_kwargs={"stderr": stderr},
            observers=[editor.observe],
            use_unstable_protocol=True,
        ) as (conn, process):
            if initialize:
                await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), WAIT)
            yield Face(conn, process, editor, log)
