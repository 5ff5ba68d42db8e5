"""What the daemon builds to keep, kept out of the garbage collector's full passes.

A full (generation 2) collection walks every object still alive. In the daemon
most of them are modules, schemas and loaded sessions that live as long as it
does, and walking them stalled the event loop for ~70 ms at a time while 200
sessions streamed (bench/streaming.py). `settle()` collects once and freezes
what is left (`gc.freeze`), so later full passes walk only what came after.
It runs once the daemon has started, and again after something large is
loaded for good (the MCP endpoint's SDK and server). The demo agent settles
too, once built: opening and prompting 4,000 sessions 200 at a time, its full
passes over the ACP SDK's models and its sessions came seven times, up to 78 ms
each (~315 ms in all); settled, twice, at most 23 ms (~40 ms in all).

It also lets the young generation grow to YOUNG objects before it is
collected, not Python's 700: a turn allocates thousands of short-lived
containers (messages, models, events), and with 700 the collector ran many
times a turn. 200 first turns at once cost the daemon ~5% less CPU at 20,000
(its CPU time, two daemons side by side, rounds alternating); what a cycle
holds waits a little longer to be freed (a few MB at most), and a closed
connection's cycles are still collected as it closes (server.py).
"""

from __future__ import annotations

import gc

YOUNG = 20_000


def settle() -> None:
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
