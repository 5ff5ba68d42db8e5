"""The importer: a module that loads late is imported off the loop's thread, which goes on meanwhile."""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from pathlib import Path

import pytest

from sessiond.daemon import importer


async def test_the_loop_goes_on_while_a_module_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The module waits for the gate before it finishes importing: the test holds its import open.
    gate = types.ModuleType("held_import_gate")
    gate.GATE = threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "held_import_gate", gate)
    (tmp_path / "held_import.py").write_text(
        "import threading\n"
        "from held_import_gate import GATE\n"
        "assert GATE.wait(60), 'the test never let the import finish'\n"
        "LOADED_ON = threading.current_thread().name\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "held_import", raising=False)
    loading = asyncio.ensure_future(importer.load("held_import"))
    try:
        # The import is under way and holds; the loop still runs other work, many turns of it.
        other = asyncio.ensure_future(asyncio.sleep(0))
        for _ in range(100):
            await asyncio.sleep(0)
        assert other.done()
        assert not loading.done()
    finally:
        gate.GATE.set()  # type: ignore[attr-defined]
    module = await asyncio.wait_for(loading, 60)
    assert module.LOADED_ON.startswith("sessiond-importer")
    assert threading.current_thread().name != module.LOADED_ON
    # Loaded once: asked again, the same module, at once.
    assert await importer.load("held_import") is module
    monkeypatch.delitem(sys.modules, "held_import")


async def test_a_module_that_fails_to_load_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_import.py").write_text("raise RuntimeError('this module is broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="this module is broken"):
        await importer.load("broken_import")
    with pytest.raises(ModuleNotFoundError):
        await importer.load("no_such_module_here")
