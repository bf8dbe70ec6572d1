"""The GPU's two launch modes (one cooperative megakernel; one launch per phase replayed as a
CUDA graph) give identical results, equal to the CPU's. Skipped without CuPy and a GPU."""

from __future__ import annotations

import pytest

from mvopt.engine import build_batch, simulate
from mvopt.engine.batch import extract_results
from mvopt.testing.backends import available_backends
from mvopt.testing.scenarios import mixed_experiments

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif("gpu" not in available_backends(), reason="needs CuPy and a GPU")]


def test_graph_launch_matches_the_megakernel_and_the_cpu() -> None:
    from mvopt.engine._gpu import GpuBackend

    EXPS = mixed_experiments(9)
    cpu = simulate(EXPS, backend="cpu")
    for launch in ("coop", "graph"):
        be = GpuBackend(launch=launch)
        batch = build_batch(EXPS)
        res = extract_results(batch, be.run(batch))
        assert all(a.same_as(b) for a, b in zip(cpu, res)), launch
