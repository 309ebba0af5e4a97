"""The package's shape: no module of src/cea imports a module that imports it back, and no floor imports one above it.

The import graph is read from the source with ``ast`` (nothing is imported): every ``import`` and ``from ... import``,
at the top of a module or inside a function, relative ones resolved; ``from . import x`` where ``x`` is a module
points at that module, anything else at the module or package it is taken from.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "cea"
# lowest first: a module may import its own floor and those below it, never one above
FLOORS = [
    ("cea.defaults", "cea.errors", "cea.hardware", "cea.progress", "cea.paths"),
    ("cea.data",),
    ("cea.encoders",),
    ("cea.knn",),
    ("cea.objectives",),
    ("cea.evaluation",),
    ("cea.reports",),
    ("cea.labelling",),
    ("cea.bundle",),
    ("cea.service", "cea.batch"),
    ("cea.training",),
    ("cea.fitting", "cea.discover", "cea.sharing"),
    ("cea.cli", "cea.__main__"),
]


def module_files(src: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package (``__init__.py`` names its package)."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its body)."""
    files = module_files(src, package)

    def known(name: str) -> str | None:  # the module itself, or the nearest enclosing one of the package
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]  # the package relative imports start in
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(parent + ([node.module] if node.module else []))
                for alias in node.names:  # from X import y: the module X.y where it is one, else X
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else known(base))
        graph[name] = {t for t in targets if t and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One closed path (first module repeated at the end) per group of modules that reach each other (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_path_through(group, graph) for group in groups]


def _path_through(group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest way from the group's first module back to itself, inside the group (breadth first)."""
    start = min(group)
    came = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while came[path[-1]] is not None:
                        path.append(came[path[-1]])
                    return [*reversed(path), start]
                if w not in came:
                    came[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"{sorted(group)} holds no cycle")


def floor(module: str) -> int:
    for i, names in enumerate(FLOORS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    raise AssertionError(f"{module} is on no floor; add it to FLOORS in tests/test_structure.py")


def test_no_module_imports_itself_back():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(path) for path in found)


def test_no_floor_imports_one_above_it():
    graph = import_graph()
    upward = sorted(
        f"{a} -> {b}" for a, targets in graph.items() for b in targets if b != PACKAGE and floor(b) > floor(a)
    )
    assert not upward, "imports that run back up: " + "; ".join(upward)


def test_the_graph_reads_what_python_does(tmp_path):
    """Function-level imports, relative ones at every level, ``from . import module`` and a module's names."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import thing\n")
    (pkg / "a.py").write_text("thing = 1\n\ndef later():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\nfrom ..a import thing\nimport p.sub.c\n")
    (pkg / "sub" / "c.py").write_text("from . import b\nfrom p import thing\n")
    graph = import_graph(tmp_path, "p")
    assert graph == {
        "p": {"p.a"},
        "p.a": {"p.sub.b"},
        "p.sub": set(),
        "p.sub.b": {"p.a", "p.sub.c"},
        "p.sub.c": {"p.sub.b", "p"},
    }
    assert cycles(graph) == [["p", "p.a", "p.sub.b", "p.sub.c", "p"]]  # one group; its path from its first module
    assert cycles({"x": {"y"}, "y": set()}) == []


# the floors whose modules read no other object's private attribute (``name._attr`` where ``name`` is not ``self`` or
# ``cls``): each reaches another through its public methods
SEALED = ("cea.bundle", "cea.service", "cea.batch")


def private_reads(src: Path = SRC, package: str = PACKAGE, within: tuple[str, ...] = SEALED) -> list[str]:
    """``module:line expression`` for every private attribute (one leading underscore; dunders are public) read on
    anything but ``self`` or ``cls`` in the modules of ``within``."""
    found = []
    for name, path in module_files(src, package).items():
        if not any(name == w or name.startswith(w + ".") for w in within):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_module_reads_another_objects_private_attributes(tmp_path):
    assert private_reads() == []
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text(
        "class A:\n    def f(self, other):\n"
        "        self._mine = other.__dict__\n"
        "        return other._theirs, self.rows._view\n"
    )
    assert private_reads(tmp_path, "p", ("p",)) == ["p:4 other._theirs", "p:4 self.rows._view"]
    assert private_reads(tmp_path, "p", ("q",)) == []
