"""What an agent's process and its commands inherit from the daemon's environment.

A real daemon started with a fake secret of its own (`SESSIOND_TCP_TOKEN`) and
one of the user's shell (`MY_SHELL_SECRET`); demo agents run `env` in their
terminal, and their own process's environment is read from /proc.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon, checked
from sessiond.client import AsyncAgent, AsyncDaemon
from sessiond.daemon.child_env import EnvRules, child_environment
from sessiond.protocol.models import AgentOptions

DAEMON_SECRET = "daemon-secret-5f1e"
SHELL_SECRET = "shell-secret-a93b"


class DaemonWithSecrets(Daemon):
    @property
    def env(self) -> dict[str, str]:
        return {
            **super().env,
            "SESSIOND_TCP_TOKEN": DAEMON_SECRET,
            "MY_SHELL_SECRET": SHELL_SECRET,
            "MY_OTHER_VAR": "other",
            "HOME": super().env.get("HOME") or "/tmp",
            "LC_TEST_LOCALE": "kept",
        }


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with checked(DaemonWithSecrets()) as running:
        yield running


async def demo_like(client: AsyncDaemon, name: str, daemon: Daemon, **options: object) -> AsyncAgent:
    """An agent running the demo agent (its own state dir), with `options`."""
    demo = await client.agent("demo")
    command = [*demo.info.command[:-1], str(daemon.home / f"state-{name}")]
    return await client.agent(name, command=command, env={"AGENT_OWN": "given"}, **options)


async def terminal_env(agent: AsyncAgent, work: Path) -> dict[str, str]:
    """The environment a command of the agent's session sees (`run env`)."""
    reply = await (await agent.session(work)).asend("run env")
    assert "exit code 0" in reply.text, reply.text
    lines = reply.text.split("\n")[1:]
    return dict(line.split("=", 1) for line in lines if "=" in line)


async def process_env(agent: AsyncAgent) -> dict[str, str]:
    """The agent process's own environment, from /proc."""
    info = await agent.aget()
    assert info.process.pid is not None
    raw = Path(f"/proc/{info.process.pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


async def test_by_default_children_get_all_but_the_daemons_own_variables(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    agent = await client.agent("demo")
    commands = await terminal_env(agent, work)
    own = await process_env(agent)
    for env in (commands, own):
        assert not [k for k in env if k.startswith("SESSIOND_")]
        assert DAEMON_SECRET not in env.values()
        assert env["PATH"]
        assert env["HOME"]
        assert env["MY_SHELL_SECRET"] == SHELL_SECRET
        assert env["MY_OTHER_VAR"] == "other"


async def test_env_clear_keeps_the_base_alone(client: AsyncDaemon, daemon: Daemon, work: Path) -> None:
    agent = await demo_like(client, "clean", daemon, env_clear=True)
    commands = await terminal_env(agent, work)
    own = await process_env(agent)
    for env in (commands, own):
        assert "MY_SHELL_SECRET" not in env
        assert "MY_OTHER_VAR" not in env
        assert "SESSIOND_TCP_TOKEN" not in env
        assert env["PATH"]
        assert env["HOME"]
        assert env["LC_TEST_LOCALE"] == "kept"
    # The agent's own env is its own: set for its process, not handed to its commands.
    assert own["AGENT_OWN"] == "given"
    assert "AGENT_OWN" not in commands


async def test_env_passthrough_keeps_only_the_names_given(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    agent = await demo_like(client, "picky", daemon, env_passthrough=["MY_SHELL_SECRET"])
    commands = await terminal_env(agent, work)
    own = await process_env(agent)
    for env in (commands, own):
        assert env["MY_SHELL_SECRET"] == SHELL_SECRET
        assert "MY_OTHER_VAR" not in env
        assert "SESSIOND_TCP_TOKEN" not in env
        assert env["PATH"]
        assert env["HOME"]


def test_the_options_are_camel_case_on_the_wire() -> None:
    wire = {"envPassthrough": ["A", "B_*"], "envClear": True, "maxPromptBytes": 5}
    options = AgentOptions.model_validate(wire)
    fields = {"env_passthrough", "env_clear", "max_prompt_bytes"}
    assert options.model_dump(by_alias=True, include=fields) == wire
    assert AgentOptions().env_passthrough is None
    assert AgentOptions().max_prompt_bytes == 1024 * 1024


def test_rules_of_the_child_environment() -> None:
    source = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LC_ALL": "C",
        "https_proxy": "http://proxy",
        "NO_PROXY": "localhost",
        "SESSIOND_HOME": "/x",
        "SESSIOND_SOCKET": "/x/s",
        "AWS_KEY": "k",
        "AWS_REGION": "r",
        "OTHER": "o",
    }
    default = child_environment({"ADDED": "1"}, EnvRules(), source=source)
    assert set(default) == set(source) - {"SESSIOND_HOME", "SESSIOND_SOCKET"} | {"ADDED"}
    base = {"PATH", "HOME", "LC_ALL", "https_proxy", "NO_PROXY"}
    assert set(child_environment(None, EnvRules(clear=True), source=source)) == base
    assert set(child_environment(None, EnvRules(passthrough=()), source=source)) == base
    picked = child_environment(None, EnvRules(passthrough=("AWS_*", "SESSIOND_SOCKET")), source=source)
    assert set(picked) == base | {"AWS_KEY", "AWS_REGION", "SESSIOND_SOCKET"}
    # What the caller adds wins over what is kept.
    assert child_environment({"PATH": "/mine"}, EnvRules(clear=True), source=source)["PATH"] == "/mine"
