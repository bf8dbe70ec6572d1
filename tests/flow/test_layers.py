"""The flow package sits beside the engine: it imports downwards only, and only its array-module
file knows about CuPy."""

from __future__ import annotations

import ast
from pathlib import Path

import mvopt.flow

PACKAGE = Path(mvopt.flow.__file__).parent
ABOVE = ("optuna", "mvopt.optimize", "mvopt.experiment", "mvopt.commands", "mvopt.__main__")


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_flow_package_imports_no_layer_above_it():
    for path in PACKAGE.glob("*.py"):
        bad = sorted(n for n in imports(path) if n.startswith(ABOVE))
        assert not bad, f"{path.name} imports {bad}"


def test_only_the_array_module_file_imports_cupy():
    users = sorted(p.name for p in PACKAGE.glob("*.py") if any(n.startswith("cupy") for n in imports(p)))
    assert users == ["xp.py"]
