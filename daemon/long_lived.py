"""What the daemon builds to keep, kept out of the garbage collector's full passes.

A full (generation 2) collection walks every object still alive. In the daemon
most of them are modules, schemas and loaded sessions that live as long as it
does, and walking them stalled the event loop for ~70 ms at a time while 200
sessions streamed (bench/streaming.py). `settle()` collects once and freezes
what is left (`gc.freeze`), so later full passes walk only what came after.
It runs once the daemon has started, and again after something large is
loaded for good (the MCP endpoint's SDK and server).
"""

from __future__ import annotations

import gc


def settle() -> None:
    gc.collect()
    gc.freeze()
