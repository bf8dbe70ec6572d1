"""The array module the array path runs on: CuPy on a GPU, NumPy as the compiled loop's oracle.

The model uses only operations both modules have with the same meaning (element-wise
arithmetic, ``minimum.at`` / ``maximum.at``, ``bincount``, ``unique``, ``cumsum``). Results are
identical on both: sums are of integers below 2**53 (exact in any order, also with a GPU's
atomics), minima and element-wise double arithmetic are exact IEEE operations on both, and no
operation is fused.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from mvopt.errors import BackendUnavailable

__all__ = ["array_module", "to_host", "segment_sum", "ranges"]


def array_module(backend: str) -> ModuleType:
    """numpy for 'cpu' (and 'cpu:N': the model is one sequence of array operations), cupy for
    'gpu' or 'gpu:N' (device N, else 0), the GPU for 'auto' when CuPy sees one."""
    from mvopt.engine import resolve_backend

    name = resolve_backend(backend)
    if name == "cpu":
        return np
    try:
        import cupy
    except ImportError as e:          # pragma: no cover - depends on the machine
        raise BackendUnavailable(f"backend {backend!r}: CuPy is not installed ({e})") from None
    device = backend.partition(":")[2].split(",")[0]
    cupy.cuda.Device(int(device) if device.isdigit() else 0).use()
    return cupy


def to_host(a) -> np.ndarray:
    """A NumPy copy of an xp array (the array itself when it is one)."""
    return a if isinstance(a, np.ndarray) else a.get()


def segment_sum(xp: ModuleType, index, values, n: int):
    """int64 sums of integer `values` per `index` in [0, n): exact while every partial sum stays
    below 2**53 (float64 accumulation, exact for such integers in any order)."""
    return xp.bincount(index, weights=values.astype(xp.float64), minlength=n).astype(xp.int64)


def ranges(xp: ModuleType, lo, count):
    """Rows with the index ranges [lo[i], lo[i] + count[i]), flattened: (the row of each element,
    the element's index). (``repeat`` with an array of counts is NumPy's alone.)"""
    end = xp.cumsum(count)
    total = int(end[-1]) if end.size else 0
    pos = xp.arange(total, dtype=xp.int64)
    row = xp.searchsorted(end, pos, side="right")
    return row, lo[row] + pos - (end - count)[row]
