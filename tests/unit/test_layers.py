"""The architecture rule, enforced: odradek's packages form layers, nothing imports upward,
no two modules import each other (directly or round a longer loop), and only the command line
talks to the terminal.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``.  A type that a
lower layer needs from a higher one is a Protocol in the lower layer instead.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.graph import cycles

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "odradek"

# Low to high.  A module may import its own layer and the layers below it.  Within a layer the
# packages may use each other, but only without cycles (checked below).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"common", "tasks", "histogram", "graph", "protocol"}),
    frozenset({"config", "state_change_log", "assignment", "net", "zk", "log", "security"}),
    frozenset({"controller"}),
    frozenset({"broker"}),  # the broker hosts the controller: broker -> controller, never back
    frozenset({"admin"}),
    frozenset({"local", "perf", "spark", "console"}),
    frozenset({"cli", "__main__"}),  # the command line sits on top of everything it runs
)
LAYER_OF = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}

# Terminal output belongs to the command line.
TERMINAL_LIBRARIES = ("click", "rich")


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # importing module, e.g. "odradek.broker.server"
    target: str  # the odradek module (or package) it names, resolved to an existing module
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imported_names(module: str, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every dotted name ``module`` imports, with relative imports made absolute."""
    is_package = MODULES[module].name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base.pop()
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                yield f"{prefix}.{alias.name}", node.lineno


@functools.cache
def syntax_tree(module: str) -> ast.Module:
    """The module's parsed source (parsed once per run: three tests walk every module)."""
    path = MODULES[module]
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imports_of(module: str) -> tuple[tuple[str, int], ...]:
    """:func:`imported_names` of the module, walked once per run (two tests need them)."""
    return tuple(imported_names(module, syntax_tree(module)))


@functools.cache
def odradek_imports() -> tuple[Import, ...]:
    found = []
    for module in MODULES:
        for name, line in imports_of(module):
            target = _resolve(name) if name.startswith("odradek") else None
            if target is not None and target != module:
                found.append(Import(module, target, line))
    return tuple(found)


def top_package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer() -> None:
    packages = {top_package(m) for m in MODULES if m != "odradek"}
    assert packages - LAYER_OF.keys() == set(), "give every new top-level package or module a layer"


def test_nothing_imports_upward() -> None:
    upward = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in odradek_imports()
        if i.target != "odradek"
        and LAYER_OF[top_package(i.target)] > LAYER_OF[top_package(i.source)]
    ]
    assert upward == []


def test_no_import_cycles() -> None:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in odradek_imports():
        edges[i.source].add(i.target)
    assert cycles(edges) == []


def test_only_the_command_line_uses_the_terminal() -> None:
    offenders = []
    for module in MODULES:
        if top_package(module) in ("cli", "__main__"):
            continue
        for name, line in imports_of(module):
            if name.split(".")[0] in TERMINAL_LIBRARIES:
                offenders.append(f"{module}:{line} imports {name}")
        for node in ast.walk(syntax_tree(module)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{module}:{node.lineno} calls print()")
    assert offenders == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_cycle_finder(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    # The rule is only as good as the cycle finder: it must see a loop, and see nothing in a DAG.
    assert sorted(cycles(edges)) == expected


def test_import_resolution_sees_relative_and_deferred_imports() -> None:
    tree = ast.parse(
        "from . import framing\n"
        "from .errors import ErrorCode\n"
        "def f():\n"
        "    from odradek.broker.server import KafkaServer\n"
    )
    names = {name for name, _ in imported_names("odradek.protocol.records", tree)}
    assert {"odradek.protocol.framing", "odradek.protocol.errors.ErrorCode",
            "odradek.broker.server.KafkaServer"} <= names
