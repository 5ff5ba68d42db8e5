"""`sessiond acp` driven by the ACP Python SDK's client side, each test with a daemon of its own
(the editor and the face it spawns: `face.py`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.harness import Daemon, checked


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with checked(Daemon()) as running:
        yield running
