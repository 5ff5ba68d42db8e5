"""Real agents from npm (claude-agent-acp, codex-acp, gemini-cli, opencode), each against the
stand-in of its model API: the daemon's cost on a turn beside the same turn straight over ACP,
and claude-agent-acp's memory with and without `maxLiveSessions`.

Skipped, with the reason printed, when node or the npm agents are not installed
(`npm ci --prefix tests/interop`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp
from acp import schema

from bench.harness import daemon, descendants, scratch, temporary_files_in, tree_rss_kib
from sessiond.client import AsyncSession, aconnect
from tests.standins.anthropic import serving as anthropic_serving
from tests.standins.gemini import serving as gemini_serving
from tests.standins.openai_responses import OpenAIResponsesStandIn

BIN = Path(__file__).resolve().parents[1] / "tests" / "interop" / "node_modules" / ".bin"
ROUNDS = 9


@contextlib.contextmanager
def _openai_serving() -> Iterator[OpenAIResponsesStandIn]:
    standin = OpenAIResponsesStandIn().start()
    try:
        yield standin
    finally:
        standin.stop()


def skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    missing = [
        name for name in ("claude-agent-acp", "codex-acp", "gemini", "opencode") if not (BIN / name).exists()
    ]
    if missing:
        return f"{', '.join(missing)} missing in {BIN} (npm ci --prefix tests/interop)"
    return None


class _Quiet:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    def on_connect(self, conn: Any) -> None:
        return None


@contextlib.asynccontextmanager
async def _direct(
    command: list[str], env: dict[str, str], work: Path, auth: str | None = None
) -> AsyncIterator[Callable[[str], Awaitable[object]]]:
    """A session straight over ACP (the SDK's client): a prompt's call. At the end, what the
    agent started goes with it: the SDK stops the agent's own process, and codex-acp's launcher
    leaves its native binary running (holding the pipe the SDK still reads)."""
    tree: list[int] = []
    tmp = scratch("sd-bench-tmp-", until_exit=True)
    async with (
        acp.spawn_agent_process(
            _Quiet(),  # type: ignore[arg-type]
            command[0],
            *command[1:],
            env={**os.environ, **temporary_files_in(tmp), **env},
            transport_kwargs={"stderr": subprocess.DEVNULL},
        ) as (conn, process)
    ):
        try:
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            if auth is not None:
                await conn.authenticate(method_id=auth)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])

            def prompt(text: str) -> Awaitable[object]:
                block = schema.TextContentBlock(type="text", text=text)
                return conn.prompt(session_id=session.session_id, prompt=[block])

            yield prompt
        finally:
            tree = descendants(process.pid)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def _rounds(direct: Callable[[str], Awaitable[object]], through: AsyncSession) -> tuple[float, float]:
    """The medians of the same turn straight and through the daemon, one of each in turn (so
    what else the machine does weighs on both alike); the first of each warms up."""
    straight: list[float] = []
    daemon_side: list[float] = []
    for index in range(ROUNDS + 1):
        started = time.perf_counter()
        await direct(f"say done {index}")
        straight.append(time.perf_counter() - started)
        started = time.perf_counter()
        await through.asend(f"say done {index}")
        daemon_side.append(time.perf_counter() - started)
    return statistics.median(straight[1:]), statistics.median(daemon_side[1:])


@dataclass
class Agent:
    """One agent from npm, the stand-in of its model API, and how it is pointed there."""

    name: str
    command: list[str]
    standin: Callable[[], contextlib.AbstractContextManager[Any]]
    env: Callable[[Any, Path], dict[str, str]]  # (stand-in, a home of its own) -> its env
    auth: str | None = None  # the ACP authMethod a client calls before session/new


def _codex_env(standin: OpenAIResponsesStandIn, home: Path) -> dict[str, str]:
    return {"CODEX_HOME": str(standin.codex_home(home)), "OPENAI_API_KEY": "sk-standin", "CODEX_API_KEY": ""}


def _bin(name: str) -> str:
    return str(BIN / name)


AGENTS = [
    Agent(
        "claude-agent-acp",
        [_bin("claude-agent-acp")],
        anthropic_serving,
        lambda s, h: {**s.env(), "CLAUDE_CONFIG_DIR": str(h)},
    ),
    Agent("codex-acp", [_bin("codex-acp")], _openai_serving, _codex_env, auth="openai-api-key"),
    Agent("gemini-cli", [_bin("gemini"), "--acp"], gemini_serving, lambda s, h: s.env(str(h))),
    Agent("opencode", [_bin("opencode"), "acp"], anthropic_serving, lambda s, h: s.opencode_env(h)),
]


async def run(sessions: int = 10) -> list[tuple[str, str, str]]:
    reason = skip_reason()
    if reason:
        print(f"real agents skipped: {reason}")
        return [("real agents against their stand-ins", "skipped", reason)]
    work = Path(tempfile.mkdtemp(prefix="sd-bench-real-"))
    homes = Path(tempfile.mkdtemp(prefix="sd-bench-agents-"))
    rows: list[tuple[str, str, str]] = []
    memory: dict[int | None, int] = {}
    with daemon() as d:
        async with aconnect(d.socket, start=False) as client:
            for each in AGENTS:
                with each.standin() as standin:
                    env = each.env(standin, homes / f"{each.name}-daemon")
                    agent = await client.agent(each.name, command=each.command, env=env)
                    session = await agent.session(work)
                    own = each.env(standin, homes / f"{each.name}-direct")
                    async with _direct(each.command, own, work, each.auth) as direct:
                        straight, through = await _rounds(direct, session)
                    await agent.aremove()
                rows.append(
                    (
                        f"one turn, {each.name}: straight over ACP / through the daemon (medians)",
                        f"{straight * 1000:.0f} / {through * 1000:.0f} ms",
                        f"{through / straight:.2f}x ({(through - straight) * 1000:+.0f} ms a turn)",
                    )
                )
            claude = AGENTS[0]
            with claude.standin() as standin:
                for limit in (2, None):
                    options = {"max_live_sessions": limit} if limit else {}
                    name = f"claude-{limit or 'all'}"
                    env = claude.env(standin, homes / name)
                    agent = await client.agent(name, command=claude.command, env=env, **options)
                    for session in await agent.sessions(sessions, work):
                        await session.asend("say done")
                    pid = (await agent.aget()).process.pid
                    assert pid is not None
                    memory[limit] = tree_rss_kib(pid)
                    await agent.aremove()
    rows.append(
        (
            f"claude-agent-acp tree memory, {sessions} sessions, maxLiveSessions 2",
            f"{memory[2] / 1024:.0f} MiB",
            f"against {memory[None] / 1024:.0f} MiB with all {sessions} live "
            f"({memory[2] / memory[None]:.2f}x)",
        )
    )
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(homes, ignore_errors=True)
    return rows


def main() -> None:
    import asyncio

    from bench.harness import table

    print(table("Real agents against their stand-ins", asyncio.run(run())))


if __name__ == "__main__":
    main()
