"""The architecture's invariants, the generated schema, and the wheel's contents."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

from sessiond.protocol import schema
from sessiond.protocol.methods import METHODS, NOTIFICATIONS
from sessiond.protocol.models import EventKind

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"daemon": "sessiond.daemon", "protocol": "sessiond.protocol", "clients/python": "sessiond.client"}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)


def test_protocol_imports_nothing_from_daemon_or_clients() -> None:
    for path in modules("protocol"):
        bad = {i for i in imports_of(path) if i.startswith(("sessiond.daemon", "sessiond.client"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_only_lsp_outbound_knows_pygls_and_only_the_backend_knows_acp() -> None:
    for path in modules("daemon"):
        rel = path.relative_to(ROOT)
        found = imports_of(path)
        if rel.name != "lsp_outbound.py":
            assert not {i for i in found if i.split(".")[0] in {"pygls", "lsprotocol"}}, rel
        if rel.name != "acp_backend.py" and "demo_agent" not in rel.parts:
            assert not {i for i in found if i.split(".")[0] == "acp"}, rel


def module_level_imports(path: Path) -> set[str]:
    """What a module imports as it loads (not inside functions, nor for type checking alone)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_daemon_loads_the_mcp_sdk_only_when_it_serves_mcp() -> None:
    mcp_modules = {"mcp_tools.py", "mcp_app.py"}
    for path in modules("daemon"):
        rel = path.relative_to(ROOT)
        if rel.name in mcp_modules or "demo_agent" in rel.parts:
            continue
        assert not {i for i in imports_of(path) if i.split(".")[0] in {"mcp", "uvicorn"}}, rel
        lazy = {"sessiond.daemon.mcp_http", "sessiond.daemon.mcp_app", "sessiond.daemon.mcp_tools"}
        assert not module_level_imports(path) & lazy, rel


# The one daemon module a client module imports as it loads: the MCP tool table the stdio bridge
# (a client of the daemon) shares with the daemon's own endpoint. It imports only the protocol.
SHARED_WITH_THE_BRIDGE = "sessiond.daemon.mcp_tools"


def test_the_client_does_not_import_the_daemon_at_module_level() -> None:
    # `sessiond serve` imports the daemon lazily; a script using the client loads none of it.
    for path in modules("clients/python"):
        rel = path.relative_to(ROOT)
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sessiond.daemon"):
                assert rel.name == "mcp_bridge.py", f"{rel} imports {node.module}"
                assert node.module == SHARED_WITH_THE_BRIDGE, f"{rel} imports {node.module}"


def test_the_mcp_tool_table_imports_nothing_of_ours_but_the_protocol() -> None:
    path = ROOT / "daemon" / "mcp_tools.py"
    ours = {i for i in imports_of(path) if i.startswith("sessiond.")}
    assert ours
    assert all(i.startswith("sessiond.protocol") for i in ours), ours


def test_the_daemon_imports_no_client_module() -> None:
    for path in modules("daemon"):
        bad = {i for i in imports_of(path) if i.startswith("sessiond.client")}
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_committed_schema_is_current() -> None:
    committed = schema.SCHEMA_PATH.read_text()
    assert committed == schema.render(), "protocol changed: run `python -m sessiond.protocol.schema`"


def test_protocol_doc_names_every_method_notification_and_event() -> None:
    doc = (ROOT / "docs" / "protocol.md").read_text()
    for name in [*METHODS, *NOTIFICATIONS]:
        assert f"### `{name}`" in doc, f"docs/protocol.md has no section for {name}"
    for kind in EventKind:
        assert f"`{kind.value}`" in doc, f"docs/protocol.md does not describe event {kind.value}"


def test_the_wheel_holds_every_module(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
    )
    wheel = next(tmp_path.glob("sessiond-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in PACKAGES.items():
        for path in modules(folder):
            rel = path.relative_to(ROOT / folder)
            expected = "/".join([*package.split("."), *rel.parts])
            assert expected in names, f"{expected} is missing from the wheel"
    assert "sessiond/protocol/schema/sessiond.schema.json" in names
