"""The import layers of `sessiond`, and no circle of imports anywhere in it.

Every import counts: at module level, inside functions, and under TYPE_CHECKING alone (a type
names what a module depends on as much as a call does); `from pkg import submodule` imports the
submodule, and relative imports are resolved. A module may import its own layer and the layers
below it; one that imports a higher layer climbs, and the test names the import. Every module
of the daemon and the protocol must be placed in a layer (a new one is placed here).

Run as a script (`python tests/test_layers.py [ROOT]`) it prints the circles and the climbs of
the tree at ROOT (this checkout by default).
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"protocol": "sessiond.protocol", "daemon": "sessiond.daemon", "clients/python": "sessiond.client"}

D = "sessiond.daemon."
# Bottom to top. A name stands for the module of that name and, when it is a package, every
# module in it. docs/architecture.md ("Layers") says what each layer is for.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("protocol", ("sessiond.protocol",)),
    (
        "foundations",
        (
            "sessiond.daemon",  # the package itself (empty)
            *(
                D + name
                for name in (
                    "store",
                    "events",
                    "states",
                    "throttle",
                    "tasks",
                    "shared_runs",
                    "changes",
                    "attribution",
                    "insight",
                    "controls",
                    "wire",
                    "gate",
                    "handshake",
                    "child_env",
                    "terminals",
                    "prompt_limit",
                    "confine",
                    "agent_types",
                    "agents_config",
                    "long_lived",
                    "importer",
                    "corked",
                    "mcp_tools",
                    "session_mcp",
                    "titles",
                )
            ),
        ),
    ),
    ("placements", (D + "placements",)),
    # agent_spawn starts agent processes, acp_backend speaks ACP to them; the demo agent is an agent
    # (a program of its own).
    (
        "the agent side",
        (D + "agent_spawn", D + "ray_runner", D + "direct_requests", D + "acp_backend", D + "demo_agent"),
    ),
    # What the core keeps: a session's record holds its placement and its agent's process.
    ("records", (D + "records", D + "session_table", D + "runs")),
    (
        "collaborators",
        (D + "insight_feed", D + "around", D + "permissions", D + "merging", D + "agent_host"),
    ),
    ("core", (D + "core",)),
    (
        "edges",
        (
            D + "door",
            D + "lsp_outbound",
            D + "server",
            D + "session_tools",
            D + "pruning",
            D + "mcp_app",
            D + "mcp_http",
        ),
    ),
    ("entry", (D + "serve", D + "__main__")),
    # A stack of its own over the protocol; it reaches the daemon twice, both above it:
    # `sessiond serve` (cli, when run) and the MCP tool table the stdio bridge shares (mcp_tools).
    ("client", ("sessiond.client",)),
]
COLLABORATORS = dict(LAYERS)["collaborators"]
ONLY_ITSELF = {"sessiond.daemon"}  # names that stand for the package's own module, not what is in it


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    path: Path
    line: int

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


def module_paths(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            if {"node_modules", "__pycache__"} & set(path.parts):
                continue
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


@functools.cache
def imports(root: Path) -> list[Import]:
    """Every import of one of ours by one of ours."""
    paths = module_paths(root)
    found: list[Import] = []
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        constants = _string_constants(tree)
        for node in ast.walk(tree):
            targets: list[str] = []
            if (loaded := _imported_by_call(node, constants)) is not None:
                targets = [loaded]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in paths]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            for target in targets:
                # `import a.b.c` loads a.b.c: the deepest of ours it names.
                while target and target not in paths:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.append(Import(name, target, path, node.lineno))
    return found


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level `NAME = "text"` assignments."""
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found[node.targets[0].id] = node.value.value
    return found


def _imported_by_call(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The module an `importlib.import_module(...)` or `importer.load(...)` call loads, when its
    argument is a string or a module constant holding one (a lazy import is an import all the
    same)."""
    if not (isinstance(node, ast.Call) and node.args):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    loads = (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "importer"
    )
    if name != "import_module" and not (name == "load" and loads):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name):
        return constants.get(arg.id)
    return None


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the name matched, layer)
    for index, (_, names) in enumerate(LAYERS):
        for prefix in names:
            inside = prefix not in ONLY_ITSELF and module.startswith(prefix + ".")
            if (module == prefix or inside) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return best[1] if best is not None else None


def climbs(found: Iterable[Import]) -> list[Import]:
    return [
        i
        for i in found
        if (a := layer_of(i.importer)) is not None and (b := layer_of(i.imported)) is not None and b > a
    ]


@dataclass(frozen=True)
class Circle:
    knot: frozenset[str]  # modules that all reach each other through imports
    path: list[Import]  # the shortest circle through the first of them

    def describe(self, root: Path) -> str:
        modules = " -> ".join([*(i.importer for i in self.path), self.path[0].importer])
        lines = "\n".join(f"    {i.importer} imports {i.imported} ({i.where(root)})" for i in self.path)
        rest = sorted(self.knot - {i.importer for i in self.path})
        also = f"\n    (in the same knot: {', '.join(rest)})" if rest else ""
        return f"{modules}\n{lines}{also}"


def circles(found: Iterable[Import]) -> list[Circle]:
    """Each knot of imports (modules that all reach each other), with one circle through it."""
    graph: dict[str, dict[str, Import]] = {}
    for i in found:
        graph.setdefault(i.importer, {}).setdefault(i.imported, i)
        graph.setdefault(i.imported, {})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    knots: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            knot = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                knot.add(w)
                if w == v:
                    break
            if len(knot) > 1:
                knots.append(knot)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)

    found_circles = []
    for knot in knots:
        start = min(knot)
        # The shortest way back to the start, within the knot (breadth first).
        came: dict[str, Import] = {}
        todo = [start]
        while todo and start not in came:
            nxt = []
            for v in todo:
                for w, imp in sorted(graph[v].items()):
                    if w in knot and w not in came:
                        came[w] = imp
                        nxt.append(w)
            todo = nxt
        path, v = [], start
        while True:
            imp = came[v]
            path.append(imp)
            v = imp.importer
            if v == start:
                break
        found_circles.append(Circle(frozenset(knot), path[::-1]))
    return found_circles


def describe_climb(i: Import, root: Path) -> str:
    a, b = layer_of(i.importer), layer_of(i.imported)
    assert a is not None
    assert b is not None
    return f"{i.importer} ({LAYERS[a][0]}) imports {i.imported} ({LAYERS[b][0]}) at {i.where(root)}"


def _in(found: Iterable[Import], *prefixes: str) -> Iterator[Import]:
    return (i for i in found if i.importer.startswith(prefixes) and i.imported.startswith(prefixes))


# ---------------------------------------------------------------- the tests


def test_every_module_of_the_daemon_and_the_protocol_has_a_layer() -> None:
    unplaced = [name for name in module_paths(ROOT) if layer_of(name) is None]
    assert not unplaced, f"place these modules in a layer of tests/test_layers.py: {unplaced}"


def test_an_import_by_importlib_counts_like_any_other(tmp_path: Path) -> None:
    """A lazy import named by a string, or by a module constant holding one, is seen: a climb
    hidden in `importlib.import_module` or `importer.load` fails the test as a plain import would."""
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "__init__.py").write_text(
        'import importlib\nSERVER = "sessiond.daemon.server"\n'
        "from sessiond.daemon import importer\n"
        "async def late():\n"
        "    importlib.import_module(SERVER), importlib.import_module('sessiond.daemon.core')\n"
        "    await importer.load('sessiond.daemon.serve')\n"
    )
    (tmp_path / "daemon").mkdir()
    for name in ("__init__", "server", "core", "serve", "importer"):
        (tmp_path / "daemon" / f"{name}.py").write_text("")
    found = {(i.importer, i.imported) for i in climbs(imports(tmp_path))}
    up = "sessiond.protocol"
    assert found == {
        (up, "sessiond.daemon.server"),
        (up, "sessiond.daemon.core"),
        (up, "sessiond.daemon.serve"),
        (up, "sessiond.daemon.importer"),  # (the plain import of it)
    }


def test_no_import_climbs_a_layer() -> None:
    bad = climbs(imports(ROOT))
    assert not bad, "imports that climb a layer:\n" + "\n".join(describe_climb(i, ROOT) for i in bad)


def test_the_daemon_loads_late_on_the_importers_thread_alone() -> None:
    """What the daemon imports by name, on first need, goes through `importer.load`: imported on
    the loop's thread it held every client up (a first turn's SDK, two seconds)."""
    daemon = [(name, path) for name, path in module_paths(ROOT).items() if name.startswith(D)]
    bad = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for name, path in daemon
        if name != D + "importer"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
    ]
    assert not bad, f"use `await importer.load(name)` instead of importlib.import_module at {bad}"


def test_the_collaborators_import_none_of_each_other() -> None:
    # What one needs of another, the core hands it (a callable, or a port the core satisfies).
    bad = [
        i for i in imports(ROOT) if layer_of(i.importer) == layer_of(COLLABORATORS[0]) == layer_of(i.imported)
    ]
    assert not bad, "\n".join(f"{i.importer} imports {i.imported} at {i.where(ROOT)}" for i in bad)


def test_no_circle_of_imports_in_the_daemon_or_the_protocol() -> None:
    found = circles(_in(imports(ROOT), "sessiond.daemon", "sessiond.protocol"))
    assert not found, "circles of imports:\n" + "\n".join(c.describe(ROOT) for c in found)


def test_no_circle_of_imports_across_the_packages() -> None:
    """The whole of sessiond, taken as three packages: none imports back one that imports it."""
    top = {
        (i.importer.split(".")[1], i.imported.split(".")[1])
        for i in imports(ROOT)
        if i.importer.split(".")[1] != i.imported.split(".")[1]
    }
    back = sorted((a, b) for a, b in top if (b, a) in top)
    assert not back, f"packages that import each other: {back}"


def test_no_circle_of_imports_in_the_client() -> None:
    found = circles(_in(imports(ROOT), "sessiond.client"))
    assert not found, "circles of imports:\n" + "\n".join(c.describe(ROOT) for c in found)


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else ROOT
    found = imports(root)
    knots = circles(found)
    up = climbs(found)
    print(f"{len(module_paths(root))} modules, {len({(i.importer, i.imported) for i in found})} imports")
    print(f"{len(knots)} circles")
    for c in knots:
        print("  " + c.describe(root).replace("\n", "\n  "))
    print(f"{len(up)} imports climb a layer ({len({(i.importer, i.imported) for i in up})} pairs of modules)")
    for i in up:
        print("  " + describe_climb(i, root))
    unplaced = [name for name in module_paths(root) if layer_of(name) is None]
    if unplaced:
        print(f"in no layer: {unplaced}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
