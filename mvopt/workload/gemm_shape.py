"""How a GEMM's shape lowers its throughput, from published measurements per GPU architecture.

The roofline of :mod:`mvopt.workload.compute` runs every GEMM at one large-GEMM rate. Smaller
GEMMs reach less of it (fewer tiles than the GPU has SMs, a short main loop over ``k``, fixed
prologue and epilogue): XLA's GEMM performance table (section ``gemm_shapes`` of
``mvopt/data/published.yaml``) measured bf16 GEMMs on Hopper at every ``m, n, k`` in 256 ... 4096.
:func:`shape_efficiency` is that table's throughput at a shape over its largest square entry,
interpolated linearly in ``log2`` of each dimension; dimensions outside the table's range are
clamped to it (larger ones count as the largest measured, smaller ones as the smallest). GPUs
without a table get 1 (every GEMM at the large-GEMM rate).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from mvopt.cluster.gpus import GpuSpec, load_published

__all__ = ["GemmShapeTable", "gemm_shape_table", "shape_efficiency"]


@dataclass(frozen=True)
class GemmShapeTable:
    """Measured GEMM throughput on a grid: ``tflops[i, j, l]`` at ``m = dims[i]``,
    ``k = dims[j]``, ``n = dims[l]`` (the source's order)."""

    name: str
    dims: tuple[int, ...]
    tflops: np.ndarray

    def __post_init__(self) -> None:
        d = len(self.dims)
        if d < 2 or list(self.dims) != sorted(set(self.dims)) or self.tflops.shape != (d, d, d):
            raise ValueError(f"gemm_shapes.{self.name}: dims must be increasing and tflops a "
                             f"{d} x {d} x {d} grid, got {self.tflops.shape}")
        if not np.all(self.tflops > 0):
            raise ValueError(f"gemm_shapes.{self.name}: every throughput must be > 0")

    def throughput(self, m: float, n: float, k: float) -> float:
        """Measured TFLOP/s at ``m x n x k``, trilinear in ``log2`` of each dimension, each
        clamped to the grid."""
        axes = [self._axis(v) for v in (m, k, n)]
        out = 0.0
        for di in (0, 1):
            for dj in (0, 1):
                for dl in (0, 1):
                    w = 1.0
                    idx = []
                    for (lo, frac), d in zip(axes, (di, dj, dl)):
                        w *= frac if d else 1.0 - frac
                        idx.append(min(lo + d, len(self.dims) - 1))
                    if w:
                        out += w * float(self.tflops[tuple(idx)])
        return out

    def efficiency(self, m: float, n: float, k: float) -> float:
        """Throughput at the shape over the largest square entry's, at most 1."""
        top = float(self.tflops[-1, -1, -1])
        return min(1.0, self.throughput(m, n, k) / top)

    def _axis(self, v: float) -> tuple[int, float]:
        """(lower grid index, fraction towards the next) of ``v`` in log2, clamped."""
        logs = [math.log2(d) for d in self.dims]
        x = min(max(math.log2(max(v, 1.0)), logs[0]), logs[-1])
        lo = max(i for i, g in enumerate(logs) if g <= x)
        if lo == len(logs) - 1:
            return lo, 0.0
        return lo, (x - logs[lo]) / (logs[lo + 1] - logs[lo])


@functools.lru_cache(maxsize=1)
def _tables() -> dict[str, GemmShapeTable]:
    """Built-in tables by the GPU names they cover."""
    out: dict[str, GemmShapeTable] = {}
    for row in load_published().get("gemm_shapes", []):
        table = GemmShapeTable(row["name"], tuple(int(d) for d in row["dims"]),
                               np.asarray(row["tflops"], dtype=float))
        for gpu in row["gpus"]:
            out[gpu] = table
    return out


def gemm_shape_table(gpu: GpuSpec) -> GemmShapeTable | None:
    """The measured shape table of a built-in GPU type, or None (user-defined GPUs, A100)."""
    return _tables().get(gpu.name)


def shape_efficiency(gpu: GpuSpec, m: float, n: float, k: float) -> float:
    """Fraction of the large-GEMM rate a ``m x n x k`` GEMM reaches on ``gpu`` (1 without a table)."""
    table = gemm_shape_table(gpu)
    return 1.0 if table is None else table.efficiency(m, n, k)
