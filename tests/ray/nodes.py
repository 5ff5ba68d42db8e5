"""What the Ray tests start on the cluster: the demo agent's command, and a worker node whose
filesystem lacks a folder this machine has."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def demo_on_ray(state: Path) -> list[str]:
    return [sys.executable, "-m", "sessiond.daemon.demo_agent", "--state-dir", str(state)]


@contextlib.contextmanager
def node_without(cluster: Any, hidden: Path, resource: str) -> Iterator[None]:
    """A worker node whose filesystem lacks what this machine has at `hidden` (and whose writes
    there this machine does not see): `ray start` inside bubblewrap, with an empty tmpfs over that
    folder (and a pid namespace, so that everything the node started ends with it)."""
    hidden.mkdir(parents=True, exist_ok=True)
    ray_cli = Path(sys.executable).parent / "ray"
    sandbox = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", str(hidden), "--unshare-pid", "--die-with-parent"]
    start = [str(ray_cli), "start", "--address", cluster.address, "--num-cpus", "1", "--block"]
    start += ["--resources", json.dumps({resource: 1}), "--disable-usage-stats"]
    node = subprocess.Popen(
        sandbox + start, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(30)
