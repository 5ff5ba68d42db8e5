"""Fixtures of the placement tests: a daemon, git repositories, and a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from placement_helpers import Sshd, free_port, git

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, aconnect

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


@pytest.fixture
async def client() -> AsyncIterator[AsyncDaemon]:
    """A daemon of the test's own (the placements' tests change its agents and repositories)."""
    daemon = Daemon().start()
    try:
        async with aconnect(daemon.socket, start=False) as connected:
            yield connected
    finally:
        assert daemon.stop() == 0
        shutil.rmtree(daemon.home, ignore_errors=True)


@pytest.fixture
def debug_daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    """A daemon of the test's own that logs at debug level (what loads when, on which thread)."""
    monkeypatch.setenv("SESSIOND_LOG", "debug")
    daemon = Daemon().start()
    try:
        yield daemon
    finally:
        assert daemon.stop() == 0
        shutil.rmtree(daemon.home, ignore_errors=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on `main` with one commit (README, src/app.py) and its own identity."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Tester")
    git(path, "config", "user.email", "tester@example.invalid")
    (path / "README").write_text("hello\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('one')\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A plain directory with a file, a subfolder, and a folder beside it that is outside."""
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "hello.txt").write_text("hi\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return root


@pytest.fixture
def off_tmp() -> Iterator[Path]:
    """A short, fresh folder outside /tmp (under /var/tmp): a sandbox's private /tmp would hide
    anything under /tmp anyway, so what is meant to be hidden by other means is tested here."""
    if not os.access("/var/tmp", os.W_OK):
        pytest.skip("/var/tmp is not writable here")
    folder = Path(tempfile.mkdtemp(prefix="sd-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    """Bounded connect retry: ready when the port answers, failed when sshd exits or time runs out."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited with {process.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} in time: {log.read_text()}")


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    """`sshd -D -e -f CONFIG` on 127.0.0.1 with a temporary host key and authorized key."""
    if SSHD is None:
        pytest.skip("sshd is not installed (Debian: apt-get install openssh-server; ./dev test does it)")
    if os.geteuid() != 0:
        pytest.skip("the test sshd runs as root (it must switch users and use its privilege separation dir)")
    folder = Path(tempfile.mkdtemp(prefix="sshd-", dir="/tmp"))
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nStrictModes no\nUsePAM no\nPidFile none\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        "Subsystem sftp internal-sftp\nLogLevel ERROR\n"
    )
    host_key = (folder / "host_key.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    # sshd refuses to start without its privilege separation directory.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = folder / "sshd.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_listening(port, process, log, time.monotonic() + 15)
        home = folder / "target"
        home.mkdir()
        yield Sshd(port, getpass.getuser(), str(folder / "client_key"), str(folder / "known_hosts"), home)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)
