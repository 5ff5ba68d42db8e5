"""A broken agents.toml stops `sessiond serve` with one sentence per problem, never a traceback.

Each case runs the real CLI in a SESSIOND_HOME of its own, whose config dir
holds the file (protocol/paths.py: $SESSIOND_HOME/config/agents.toml).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def home() -> Iterator[Path]:
    # Short, under /tmp: the daemon's unix socket path must stay under 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def serve_with(home: Path, content: bytes) -> tuple[int, str, Path]:
    """Write agents.toml, run `sessiond serve`; its exit code, stderr and the file's path."""
    config = home / "config" / "agents.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes(content)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIOND_")}
    env["SESSIOND_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "sessiond.client", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr, config


def test_wrong_types_are_one_sentence_per_field_naming_file_and_key(home: Path) -> None:
    code, err, path = serve_with(
        home,
        b"""
[agents.claude]
command = ["npx", "-y", "@zed-industries/claude-agent-acp"]
env = { IS_SANDBOX = 1 }

[agents.claude.options]
max_live_sessions = "two"
turn_timeout = -5
default_placement = "moon"
max_prompt_bytes = 0

[agents.claude.options.placement_settings]
ssh_connect_timeout = "soon"

[agents.other]
command = []
options = { env_passthrough = "HOME", envClear = "maybe", colour = "red" }

[agents.third]
env = {}
""",
    )
    assert code != 0
    lines = err.strip().splitlines()
    expected = [
        f"{path}: agents.claude.options.max_live_sessions: must be an integer ≥ 1, got 'two'",
        f"{path}: agents.claude.options.turn_timeout: must be a number > 0, got -5",
        f"{path}: agents.claude.options.default_placement: must be one of "
        "'here', 'worktree', 'sandbox', 'container' or 'ssh', got 'moon'",
        f"{path}: agents.claude.options.max_prompt_bytes: must be an integer ≥ 1, got 0",
        f"{path}: agents.claude.options.placement_settings.ssh_connect_timeout: "
        "must be a number > 0, got 'soon'",
        f"{path}: agents.claude.env.IS_SANDBOX: must be a string, got 1",
        f"{path}: agents.other.command: must list at least 1 item, got []",
        f"{path}: agents.other.options.env_passthrough: must be a list, got 'HOME'",
        f"{path}: agents.other.options.envClear: must be true or false, got 'maybe'",
        f"{path}: agents.third.command: is required; add it",
    ]
    for sentence in expected:
        assert any(line.removeprefix("sessiond: ") == sentence for line in lines), (sentence, err)
    unknown = next(line for line in lines if "agents.other.options.colour" in line)
    assert unknown.startswith(f"{path}: agents.other.options.colour: is not a setting here; known: ")
    assert "max_live_sessions" in unknown
    assert lines[-1] == f"fix {path} (or move it away) and start sessiond again"
    # Nothing was left serving.
    assert not (home / "run" / "sessiond.sock").exists()


def test_a_file_that_is_not_utf8_is_named(home: Path) -> None:
    code, err, path = serve_with(home, b'[agents.a]\ncommand = ["caf\xe9"]\n')
    assert code != 0
    assert err.strip() == (
        f"sessiond: {path}: is not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8 or move it away"
    )


def test_invalid_toml_names_file_line_and_column(home: Path) -> None:
    code, err, path = serve_with(home, b'[agents.a]\ncommand = ["x"]\noptions = { turn_timeout = }\n')
    assert code != 0
    assert err.strip() == (
        f"sessiond: {path}: line 3, column 28: invalid TOML (invalid value); fix the file or move it away"
    )


def test_agents_that_is_not_a_table_is_said_plainly(home: Path) -> None:
    code, err, path = serve_with(home, b'agents = "claude"\n')
    assert code != 0
    assert err.strip() == (
        f"sessiond: {path}: agents: must be a table of agent tables ([agents.NAME]), got 'claude'"
    )


def test_a_command_that_starts_the_daemon_says_every_problem_too(home: Path) -> None:
    """`sessiond new` starting a daemon that a broken agents.toml stops says all it said, not its
    first problem alone."""
    config = home / "config" / "agents.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[agents.a]\ncommand = "not a list"\n[agents.b]\noptions = { turn_timeout = "soon" }\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIOND_")}
    env["SESSIOND_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "sessiond.client", "new", "--root", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    said = done.stderr
    assert f"{config}: agents.a.command: must be a list, got 'not a list'" in said
    assert f"{config}: agents.b.command: is required; add it" in said
    assert f"{config}: agents.b.options.turn_timeout: must be a number > 0, got 'soon'" in said
    assert f"fix {config} (or move it away) and start sessiond again" in said
