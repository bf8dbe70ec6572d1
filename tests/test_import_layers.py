"""Imports run one way: the layers of docs/architecture.md, checked on the source.

Every import of an ``mvopt`` module counts, wherever it is written (a function's lazy import
included): a package may import packages of lower layers only, never one of its own layer or
a higher one, so there is no circle between packages. Inside the engine, its host modules keep
the same rule (layout and capacity, then the batch, the backends, the scheduler, and simulate).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MVOPT = Path(__file__).resolve().parents[1] / "mvopt"

# Top to bottom, as docs/architecture.md draws them ("mvopt" is the package's own __init__: its version).
PACKAGE_LAYERS: list[tuple[str, ...]] = [
    ("__main__", "commands", "testing"),     # the CLI; helpers shared by tests
    ("bench",),                              # speed benchmarks: the use-case spaces and their k=4 ceiling
    ("optimize",),                           # the search over configurations
    ("build",),                              # configuration -> experiment; the simulator as an evaluator
    ("flow",),                               # the flow-level (fluid) simulator, over the engine's inputs
    ("engine",),                             # the packet-level simulator of a task graph on a topology
    ("workload", "io"),                      # training task graphs; other simulators' files
    ("comm",),                               # collectives -> flows and intra-server times
    ("cluster",),                            # hardware: topologies, routing, GPU types
    ("evaluation",),                         # the evaluator contract
    ("config",),                             # the strict configuration ...
    ("_cfg",),                               # ... its sections and the algorithm registries
    ("procpool", "shmtransfer", "files", "sizes"),   # process pools, shared-memory transfer, file I/O, size limits
    ("errors", "mvopt"),
]

# The engine's modules, top to bottom.
ENGINE_LAYERS: list[tuple[str, ...]] = [
    ("__init__",),                            # simulate
    ("balance",), ("split",), ("reruns",), ("race",),   # the scheduler: spread over workers, split by
                                                        # memory, rerun out-of-slot ones at once, race
    ("workers",), ("backends",), ("_gpu",), ("_cpu",), ("cxx",), ("ctx", "source"),    # the backends
    ("batch", "reference"),                   # the batch (and the reference, which tests compare it with)
    ("threads", "sizing"), ("capacity", "routes"),                     # layout and capacity
    ("params", "progress", "results", "schema", "backend_defaults"), ("tasks",),
]


def _unit(module: str, depth: int) -> str:
    """The package (depth 1) or engine module (depth 2) a dotted module name belongs to."""
    parts = module.split(".")
    return parts[depth] if len(parts) > depth else ("mvopt" if depth == 1 else "__init__")


def _imports(path: Path, text: str) -> list[tuple[str, int]]:
    """Every mvopt module the source `text` of `path` imports (a ``from X import name`` of a
    submodule counts as that submodule), with its line."""
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "mvopt"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mvopt":
            base = MVOPT.parent.joinpath(*node.module.split("."))
            for a in node.names:
                sub = base / a.name
                is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                out.append((f"{node.module}.{a.name}" if is_module else node.module, node.lineno))
    return out


def _violations(sources: dict[Path, str], layers: list[tuple[str, ...]], depth: int,
                within: str | None) -> list[str]:
    level = {name: k for k, names in enumerate(layers) for name in names}
    problems = []
    for path, text in sources.items():
        rel = path.relative_to(MVOPT.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        here = _unit(module, depth)
        if here not in level:
            problems.append(f"{rel}: {here!r} is in no layer (place it in tests/test_import_layers.py and "
                            "docs/architecture.md)")
            continue
        for target, line in _imports(path, text):
            if within is not None and not target.startswith(within + "."):
                continue
            there = _unit(target, depth)
            if there == here:
                continue
            if there not in level:
                problems.append(f"{rel}.py:{line} imports {target}, which is in no layer")
            elif level[there] <= level[here]:
                how = "its own layer" if level[there] == level[here] else "a higher layer"
                problems.append(f"{rel}.py:{line}: {here} imports {there} ({target}), {how}")
    return problems


def _read(files) -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(files)}


def test_packages_import_only_lower_layers() -> None:
    assert _violations(_read(MVOPT.rglob("*.py")), PACKAGE_LAYERS, 1, None) == []


def test_engine_host_modules_import_only_lower_layers() -> None:
    assert _violations(_read((MVOPT / "engine").glob("*.py")), ENGINE_LAYERS, 2, "mvopt.engine") == []


@pytest.mark.parametrize("source, problem", [
    ("from mvopt.optimize.evaluator import Evaluation\n",
     "1: build imports optimize (mvopt.optimize.evaluator), a higher layer"),
    ("def f():\n    from mvopt import commands\n", "2: build imports commands (mvopt.commands), a higher layer"),
    ("import mvopt.testing.scenarios\n", "1: build imports testing (mvopt.testing.scenarios), a higher layer"),
    ("from mvopt.engine.batch import build_batch\nimport mvopt.evaluation\n", None),
])
def test_the_check_sees_lazy_and_upward_imports(source, problem) -> None:
    """An import of the same or a higher layer is reported with its file and line, wherever it
    is written; an import of a lower layer is not."""
    found = _violations({MVOPT / "build" / "probe.py": source}, PACKAGE_LAYERS, 1, None)
    assert found == ([] if problem is None else [f"mvopt/build/probe.py:{problem}"])
