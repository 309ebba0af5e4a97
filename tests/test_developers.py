"""DEVELOPERS.md's layout names only modules that exist, and every module of the package.

The layout block (the fenced block under "## Layout") lists each package of ``src/cea/`` with its modules, written
as ``name (what it holds)``, comma-separated, and top-level modules as ``name.py``. The test reads it generically:
a package line ``pkg/  ...`` and its continuation lines; within them, every comma- or semicolon-separated item that
is one bare word once the parentheses are dropped (after a colon, where prose opens the line) is a module of ``pkg``,
every ``a/b`` is the module ``b`` of ``a``, every ``name.py`` a top-level module. Prose items (several words) are read
as prose.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "cea"
WORD = re.compile(r"[a-z_][a-z0-9_]*")


def layout(text: str) -> dict[str, str]:
    """``{package or "": its description}`` of the ``src/cea/`` part of the layout block in ``text``."""
    block = re.search(r"^## Layout.*?^```\w*\n(.*?)^```", text, re.M | re.S)
    assert block, "DEVELOPERS.md has no fenced block under '## Layout'"
    entries: dict[str, str] = {}
    current, inside = None, False
    for line in block.group(1).splitlines():
        if line.startswith("src/cea/"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break  # tests/, bench/: outside the package
        m = re.match(r"^ {1,4}(\S+)\s+(.*)$", line) if inside else None
        if m and (m.group(1).endswith("/") or m.group(1).endswith(".py")):
            current = m.group(1).rstrip("/") if m.group(1).endswith("/") else ""
            if m.group(1).endswith(".py"):
                entries.setdefault("", "")
                entries[""] += f", {m.group(1)}"
            else:
                entries[current] = m.group(2)
        elif inside and current and line.strip():
            entries[current] += " " + line.strip()
    return entries


def named(entries: dict[str, str]) -> set[str]:
    """The module paths (``pkg/name``, ``name.py``, ``pkg``) the layout names."""
    names = set()
    for package, text in entries.items():
        if package:
            names.add(package)
        while re.search(r"\([^()]*\)", text):
            text = re.sub(r"\([^()]*\)", "", text)  # what a module holds, not its name
        names |= {f"{a}/{b}" for a, b in re.findall(r"\b([a-z_]+)/([a-z_]+)\b", text)}
        names |= set(re.findall(r"\b([a-z_]+\.py)\b", text))
        for item in re.split(r"[,;]", text):
            item = item.rpartition(":")[2].strip()  # "what the package is: first module"
            if package and WORD.fullmatch(item):
                names.add(f"{package}/{item}")
    return names


def exists(name: str) -> bool:
    path = SRC / name
    return path.is_dir() or path.with_suffix(".py").exists() or (name.endswith(".py") and path.exists())


def test_the_parser_reads_modules_and_skips_prose():
    text = (
        "## Layout\n\n```\nsrc/cea/\n  knn/   index (kinds: exact, int8), search,\n         head (the linear head)\n"
        "  cli/   typer commands, thin over the API\n  discover/  new classes: beside fitting.py; its figures"
        " in evaluation/clustering\n  defaults.py  the defaults\ntests/  mirrors\n```\n"
    )
    assert named(layout(text)) == {
        "knn",
        "knn/index",
        "knn/search",
        "knn/head",
        "cli",
        "discover",
        "fitting.py",
        "evaluation/clustering",
        "defaults.py",
    }


def test_developers_names_only_modules_that_exist():
    names = named(layout((ROOT / "DEVELOPERS.md").read_text()))
    assert len(names) > 20, f"the layout block reads as {sorted(names)}"
    missing = sorted(n for n in names if not exists(n))
    assert not missing, f"DEVELOPERS.md's layout names modules that do not exist: {missing}"


def modules() -> set[str]:
    """Every module of ``src/cea/`` as the layout names it: ``pkg/name``, ``pkg`` and top-level ``name.py``."""
    found = set()
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).parts
        if len(parts) == 1:
            if path.name not in ("__init__.py", "__main__.py"):
                found.add(path.name)
        elif path.name == "__init__.py":
            found.add(parts[0])
        elif len(parts) == 2:
            found.add(f"{parts[0]}/{path.stem}")
    return found


def test_developers_names_every_module():
    names = named(layout((ROOT / "DEVELOPERS.md").read_text()))
    objectives = {
        f"objectives/{name}"
        for name in (
            "cea",
            "memory",
            "softmax",
            "triplet",
            "supcon",
            "normalized_softmax",
            "multitask",
            "cosine_regression",
            "simcse",
            "micse",
            "mlm",
        )
    }
    unnamed = sorted(modules() - names - objectives)  # the objectives: "one file per objective (...)" names them
    assert not unnamed, f"DEVELOPERS.md's layout leaves out: {unnamed}; add each to its package's line"
