"""The package's layers: imports point down, never up, and no module imports itself back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "interplay"
# Lowest first; a module may import from its own layer or any layer before it. The loggers
# know nothing of the loop (the loop uses them), so they sit low.
ORDER = {name: i for i, name in enumerate(
    ["errors", "seeding", "loggers", "config", "envs", "run", "data", "nets", "algos", "backends",
     "experiment", "population", "cli", "docs"])}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("interplay"):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("interplay"))
        out[name] = found
    return out


def test_every_package_is_in_a_layer():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    assert packages <= set(ORDER), f"not placed in a layer: {packages - set(ORDER)}"


@pytest.mark.parametrize("module,targets", sorted(imports().items()))
def test_imports_point_down(module, targets):
    here = layer(module)
    if here == "__init__":  # the package's face re-exports from everywhere
        return
    up = [t for t in targets if layer(t) in ORDER and ORDER[layer(t)] > ORDER[here]]
    assert not up, f"{module} ({here}) imports from a higher layer: {up}"


def test_no_import_cycles():
    graph = {m: {t for t in ts if t in imports_cache and t != m} for m, ts in imports_cache.items()}
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for t in graph[m]:
            if seen.get(t) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path[path.index(t):] + [t])}")
            if t not in seen:
                visit(t, [*path, t])
        seen[m] = 2

    for m in graph:
        if m not in seen and m != "interplay":
            visit(m, [m])


imports_cache = imports()
