"""The one thread that imports what the daemon loads on first need, while its loop goes on serving.

What loads late is heavy: the daemon behind the door at start (~0.3 s), the ACP SDK on the
first turn (~0.9 s), the MCP SDK and its server with the daemon's MCP endpoint (~1 s), pygls
once an editor connects (~0.8 s), asyncssh with the first ssh placement (~0.2 s). Imported on
the loop's thread, such a module holds every client up for as long: a first turn, importing
the two SDKs there, kept any other client's call waiting two seconds. Here the loop awaits a
module and answers others meanwhile (sharing the GIL with the import, which lets it go every
few milliseconds).

One thread imports them all, one after another: two threads importing packages that share
modules at the same time can meet a half-imported one. The loop's own imports stay small
(a module of the daemon's own, say) and are not of these packages.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

log = logging.getLogger("sessiond.importer")

_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-importer")


def _import(name: str) -> ModuleType:
    if name in sys.modules:  # imported already, by this thread as a rule
        return sys.modules[name]
    started = time.perf_counter()
    __import__(name)  # (as an import statement does: `importlib.import_module` raises no audit event)
    module = sys.modules[name]
    log.debug("loaded %s (%.2f s)", name, time.perf_counter() - started)
    return module


async def load(name: str) -> ModuleType:
    """The module `name`, imported on the importer's thread if it has not been yet. Never look in
    `sys.modules` first: a module being imported is there, half made, until its import ends."""
    return await asyncio.get_running_loop().run_in_executor(_THREAD, _import, name)
