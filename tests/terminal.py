"""A real terminal for the tests of what a person sees in one: tmux, detached, read with
capture-pane; and the rows of ``sessiond watch`` as it draws them."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable

import pytest


class Tmux:
    """A detached tmux session of its own (its own server socket), read with capture-pane."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is missing: `./dev test` installs it (Debian: apt-get install tmux)")
        self.socket = f"sd-test-{uuid.uuid4().hex[:8]}"
        exports = [f"{key}={value}" for key, value in env.items() if key.startswith("SESSIOND_")]
        self.run("new-session", "-d", "-s", "watch", "-x", "150", "-y", "30", "env", *exports, *command)

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "watch")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "watch", *keys)

    def wait_for(self, check: Callable[[str], bool], timeout: float = 30.0) -> str:
        """Poll the screen until ``check`` holds (the terminal has no event to wait on); a check
        that looks for what is not drawn yet (a row, the bottom line) is not met."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            with contextlib.suppress(LookupError):
                if check(screen):
                    return screen
            if time.monotonic() > deadline:
                size = self.run("display", "-p", "-t", "watch", "#{window_width}x#{window_height}")
                raise AssertionError(f"the screen ({size.strip()}) never matched; it shows:\n{screen}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return "watch" in self.run("list-sessions", "-F", "#{session_name}")

    def quit(self, key: str = "q", timeout: float = 30.0) -> None:
        """Press `key` and wait for the program to exit (its tmux session ends with it)."""
        self.keys(key)
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.alive(), self.screen()

    def kill(self) -> None:
        self.run("kill-server")


def row_of(screen: str, session: str) -> str:
    """The session's row, as shown (with its marker: ">" when selected); LookupError if none."""
    for line in screen.splitlines():
        if line[2:].startswith(session + " "):
            return line
    raise LookupError(f"no row of {session} on the screen")


def bottom(screen: str) -> str:
    """The last line drawn (the view's bottom line: its keys, a question, a notice)."""
    return screen.rstrip().splitlines()[-1]


def cells(screen: str, session: str) -> list[str]:
    """The session's row without its marker, split: id, title ("-": none), agent, status, plan, ..."""
    return row_of(screen, session)[2:].split()
