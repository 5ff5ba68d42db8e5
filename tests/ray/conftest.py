"""The Ray tests' cluster and daemon: a real local cluster (`ray.cluster_utils.Cluster`, a head
and two workers with custom resources, all on this machine) and one daemon joined to it, shared
by every module here (the cluster takes a while to come up)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import ray.cluster_utils as ray_cluster_utils  # the test extra installs ray

from bench.harness import Daemon, checked


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """A head (no resources for agents) and two workers, labelled node-a and node-b; their
    sessions' files in a folder of their own, removed at the end (Ray's default, /tmp/ray, kept
    every run's: 64 had gathered here)."""
    folder = tempfile.mkdtemp(prefix="sdray-", dir="/tmp")  # (short: Ray's sockets are in it)
    previous = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = folder
    try:
        running = ray_cluster_utils.Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
        running.nodes = {
            "a": running.add_node(num_cpus=1, resources={"agents": 1, "node-a": 1}),
            "b": running.add_node(num_cpus=1, resources={"agents": 1, "node-b": 1}),
        }
        running.wait_for_nodes()
        yield running
        running.shutdown()
    finally:
        if previous is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = previous
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(cluster: Any) -> Iterator[Daemon]:
    """One daemon, joined to the cluster through RAY_ADDRESS."""
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        with checked(Daemon()) as running:
            yield running
    finally:
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous
