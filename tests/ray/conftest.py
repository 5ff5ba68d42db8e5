"""The Ray tests' cluster and daemon: a real local cluster (`ray.cluster_utils.Cluster`, a head
and two workers with custom resources, all on this machine) and one daemon joined to it, shared
by every module here (the cluster takes a while to come up)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import ray.cluster_utils as ray_cluster_utils  # the test extra installs ray

from bench.harness import Daemon, checked, ray_files_in_scratch


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """A head (no resources for agents) and two workers, labelled node-a and node-b; their
    session files in a scratch folder, removed at the end."""
    with ray_files_in_scratch():
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
