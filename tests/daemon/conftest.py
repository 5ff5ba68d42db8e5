"""Real daemons, each in a SESSIOND_HOME of its own, driven through the real Python client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.harness import Daemon, checked


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with checked(Daemon()) as running:
        yield running
