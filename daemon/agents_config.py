"""Agents the daemon knows without being told: the built-in demo agent and agents.toml.

agents.toml (under the config dir) holds one table per agent::

    [agents.claude]
    command = ["npx", "-y", "@zed-industries/claude-agent-acp"]
    env = { IS_SANDBOX = "1" }
    options = { max_live_sessions = 4, turn_timeout = 900 }
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from pydantic import ValidationError

from sessiond.protocol.models import AgentOptions, AgentSpec

DEMO = "demo"


def demo_spec(state_dir: Path) -> AgentSpec:
    return AgentSpec(
        name=DEMO,
        command=[
            sys.executable,
            "-m",
            "sessiond.daemon.demo_agent",
            "--state-dir",
            str(state_dir / "demo-agent"),
        ],
        env={},
        options=AgentOptions(),
    )


class ConfigError(Exception):
    pass


def load_agents_toml(path: Path) -> list[AgentSpec]:
    """The agents of an agents.toml; a missing file is no agents, a broken one a clear error."""
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}; fix the file or move it away") from None
    agents = data.get("agents", {})
    if not isinstance(agents, dict):
        raise ConfigError(f"{path}: [agents] must be a table of agent tables")
    specs = []
    for name, table in agents.items():
        try:
            specs.append(AgentSpec.model_validate({"name": name, **table}))
        except (ValidationError, TypeError) as exc:
            raise ConfigError(f"{path}: agent {name!r}: {exc}") from None
    return specs
