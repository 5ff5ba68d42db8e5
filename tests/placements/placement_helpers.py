"""Small helpers the placement tests share (imported as a plain module: the tests have no package)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiond.client import AsyncDaemon
from sessiond.daemon.placements import PlacementOptions
from sessiond.protocol.models import MergeEntry, MergeList


def group_alive(pgid: int) -> bool:
    """Whether any process of process group `pgid` is still running (zombies do not count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which is in parentheses and may hold spaces.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


async def gone(pgid: int, within: float = 5.0) -> bool:
    """Whether process group `pgid` has ended within `within` seconds (a kill lands asynchronously)."""
    deadline = asyncio.get_running_loop().time() + within
    while group_alive(pgid):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot be used here, or None when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap; ./dev test does it)"
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot start a sandbox here: {probe.stderr.strip()}"
    return None


def make_escapes(root: Path, outside: Path) -> list[str]:
    """Every shape of path that leaves `root`, made real on disk where a link is needed."""
    (root / "link_out").symlink_to(outside)
    (root / "file_link_out").symlink_to(outside / "secret.txt")
    (root / "dangling_out").symlink_to(outside / "not-yet.txt")
    (root / "sub" / "up").symlink_to("../..")
    return [
        "../outside/secret.txt",
        str(outside / "secret.txt"),
        "sub/../../outside/secret.txt",
        "link_out/secret.txt",
        "link_out/new.txt",
        "file_link_out",
        "dangling_out",
        "sub/up/outside/secret.txt",
        "missing/../../outside/new.txt",
        "/etc/passwd",
        "/",
        "..",
    ]


# What a sandboxed command tries, one check per argument NAME=KIND:TARGET; each prints
# `OK NAME` when it worked, else `NO NAME <exception>: <message>`. KINDs: read PATH, write PATH,
# unix PATH (connect), tcp HOST:PORT (connect), procroot PID:PATH (read PATH through
# /proc/PID/root, i.e. in that process's view of the file system, around any mount).
# The probe runs inside sandboxes, which give /tmp a tmpfs of their own: the system's Python
# runs it (it needs only the standard library), not the venv's, which lives under /tmp when the
# checkout does.
PROBE_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

PROBE = r"""
import socket, sys
for arg in sys.argv[1:]:
    name, _, check = arg.partition("=")
    kind, _, target = check.partition(":")
    try:
        if kind == "read":
            open(target, "rb").read(1)
        elif kind == "write":
            open(target, "w").write("escaped\n")
        elif kind == "unix":
            socket.socket(socket.AF_UNIX).connect(target)
        elif kind == "tcp":
            host, _, port = target.rpartition(":")
            socket.create_connection((host, int(port)), timeout=5).close()
        elif kind == "procroot":
            pid, _, path = target.partition(":")
            open(f"/proc/{pid}/root{path}", "rb").read(1)
        else:
            raise ValueError(kind)
        print("OK", name)
    except Exception as exc:
        print("NO", name, f"{type(exc).__name__}: {exc}")
"""


def write_probe(folder: Path) -> Path:
    path = folder / "probe.py"
    path.write_text(PROBE)
    return path


def probe_results(output: str) -> dict[str, str]:
    """{NAME: "OK" or "NO <exception>: <message>"} from the probe's output (other lines ignored)."""
    results = {}
    for line in output.splitlines():
        verdict, _, rest = line.partition(" ")
        if verdict in ("OK", "NO"):
            name, _, detail = rest.partition(" ")
            results[name] = f"{verdict} {detail}".strip()
    return results


def git(cwd: Path | str, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}
    ).stdout.strip()


def bare_repository(folder: Path) -> Path:
    """A bare repository on `main` with one commit (README), as a server would hold it."""
    remote = folder / "remote.git"
    git(folder, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = folder / "seed"
    git(folder, "clone", "-q", str(remote), str(seed))
    git(seed, "config", "user.name", "Tester")
    git(seed, "config", "user.email", "tester@example.invalid")
    (seed / "README").write_text("hello\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial")
    git(seed, "push", "-q", "origin", "main")
    shutil.rmtree(seed)
    return remote


async def merged(client: AsyncDaemon, session: str, **params: Any) -> MergeEntry:
    async with client.events(sessions=[session], kinds=["merge.step"]) as events:
        entry = await client._call("merge/request", MergeEntry, session=session, **params)
        assert entry.status != "queued" or entry.position is not None, "a queued merge says its place"
        async with asyncio.timeout(120):
            async for event in events:
                if event.data.get("step") in ("merged", "failed"):
                    break
    (done,) = [e for e in (await client._call("merge/list", MergeList)).entries if e.branch == entry.branch]
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Sshd:
    port: int
    user: str
    key: str
    known_hosts: str
    home: Path  # a directory the tests may use as the target's session directories

    def options(self, directory: str, port: int | None = None) -> PlacementOptions:
        return PlacementOptions(
            ssh_target=f"{self.user}@127.0.0.1:{port or self.port}",
            ssh_dir=directory,
            ssh_key_file=self.key,
            ssh_known_hosts=self.known_hosts,
            ssh_connect_timeout=5.0,
        )
