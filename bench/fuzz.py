"""Fuzz a real daemon with the strategies of tests/security and print a report (`./dev fuzz`).

python -m bench.fuzz [--examples 10000] [--seed N]

Unlike the pytest run, it does not stop at the first broken property: it runs every
example, then reports cases run, error responses by code, the daemon's RSS before and
after, crashes, hung connections, and each kind of broken property with its first input.
Exits 1 when any property broke.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from sessiond.protocol.errors import ErrorCode
from tests.security.strategies import envelope_messages, framings, notifications, table_messages
from tests.security.target import Outcome, Target, run_framing, run_message, run_notice

# The same shares as tests/security/test_fuzz.py.
KINDS: list[tuple[str, float, st.SearchStrategy[Any], Callable[[Target, Any], Outcome]]] = [
    ("method table requests", 0.45, table_messages(), run_message),
    ("envelopes", 0.2, envelope_messages(), run_message),
    ("framing", 0.2, framings(), run_framing),
    ("notifications", 0.15, notifications(), run_notice),
]


class Tally:
    def __init__(self) -> None:
        self.cases: Counter[str] = Counter()
        self.codes: Counter[int] = Counter()
        self.results = 0
        self.crashes = 0
        self.hung = 0
        self.problems: Counter[str] = Counter()
        self.first: dict[str, tuple[str, str]] = {}  # class -> (input, problem), the shortest input seen

    def add(self, kind: str, case: Any, outcome: Outcome) -> None:
        self.cases[kind] += 1
        self.codes.update(outcome.codes)
        self.results += outcome.results
        self.crashes += outcome.crashed
        self.hung += outcome.hung
        for problem in outcome.problems:
            key = f"{kind}: {problem.split(':', 1)[0]}: {_what(case)}"
            self.problems[key] += 1
            text = repr(case)
            if key not in self.first or len(text) < len(self.first[key][0]):
                self.first[key] = (text, problem.splitlines()[0][:400])


def _what(case: Any) -> str:
    mode = getattr(case, "mode", "")
    note = getattr(case, "note", "")
    # Group by the kind of input, not by method: "agent/create wrong-type" -> "wrong-type".
    return f"{note.split(' ', 1)[-1]} ({mode})"


def run(examples: int, seed_value: int) -> int:
    target = Target()
    tally = Tally()
    try:
        target.check_daemon(Outcome(), "start")
        rss_before = target.rss_kib()
        started = time.perf_counter()
        for kind, share, strategy, runner in KINDS:
            count = max(1, round(examples * share))

            @seed(seed_value)
            @settings(
                max_examples=count,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategy)
            def one(case: Any) -> None:
                tally.add(kind, case, runner(target, case))  # noqa: B023 (run before the loop moves on)

            print(f"fuzz: {count} {kind}...", file=sys.stderr, flush=True)
            one()
        elapsed = time.perf_counter() - started
        rss_after = target.rss_kib()
    finally:
        target.close()
    print(report(tally, examples, seed_value, elapsed, rss_before, rss_after, target.restarts))
    return 1 if tally.problems else 0


def report(
    tally: Tally, examples: int, seed_value: int, elapsed: float, before: int, after: int, restarts: int
) -> str:
    names = {int(code): code.name for code in ErrorCode}
    lines = [
        f"sessiond fuzz: {sum(tally.cases.values())} cases in {elapsed:.0f} s (seed {seed_value})",
        "",
        "cases run",
        *(f"  {count:>7}  {kind}" for kind, count in tally.cases.items()),
        "",
        "responses to the fuzzed inputs",
        f"  {tally.results:>7}  results",
        *(f"  {n:>7}  error {c} {names.get(c, '?')}" for c, n in sorted(tally.codes.items(), key=str)),
        "",
        f"daemon RSS   before {before / 1024:.1f} MiB, after {after / 1024:.1f} MiB"
        + (f" (of the daemon restarted {restarts} times)" if restarts else ""),
        f"crashes      {tally.crashes}",
        f"hung         {tally.hung}",
        f"broken       {sum(tally.problems.values())} in {len(tally.problems)} classes",
    ]
    for key, count in tally.problems.most_common():
        text, problem = tally.first[key]
        lines += ["", f"[{count}x] {key}", f"  {problem}", f"  shortest input: {text[:600]}"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="in all (default 10,000)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random, printed)")
    args = parser.parse_args()
    seed_value = args.seed if args.seed is not None else random.randrange(2**32)
    return run(args.examples, seed_value)


if __name__ == "__main__":
    sys.exit(main())
