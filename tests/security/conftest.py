"""One real daemon for the fuzz tests, and the hypothesis profiles.

CI (the default): derandomized, 1,000 examples in all, no shrinking (a daemon
round trip per candidate; a hung one costs the whole timeout), so a failure
prints the very input that broke a property. `SESSIOND_FUZZ_EXAMPLES=10000`
selects the `fuzz` profile: random (the seed is printed; `SESSIOND_FUZZ_SEED`
replays it) and that many examples in all. `SESSIOND_FUZZ_SHRINK=1` shrinks failures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.security.target import Target

TOTAL = int(os.environ.get("SESSIOND_FUZZ_EXAMPLES", "0") or 0)
_phases = [Phase.explicit, Phase.reuse, Phase.generate]
if os.environ.get("SESSIOND_FUZZ_SHRINK") == "1":
    _phases.append(Phase.shrink)
_common = {
    "deadline": None,
    "database": None,
    "phases": _phases,
    "print_blob": True,
    "suppress_health_check": list(HealthCheck),
}
settings.register_profile("ci", derandomize=True, **_common)
settings.register_profile("fuzz", derandomize=False, **_common)
settings.load_profile("fuzz" if TOTAL else "ci")


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    running = Target()
    yield running
    running.close()
