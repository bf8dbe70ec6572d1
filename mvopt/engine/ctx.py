"""The `struct Ctx` the kernels see, built on the host: the batch's counts and one address per
column (host addresses for the CPU backend, device addresses for the GPU backend). Its layout is
generated from mvopt/engine/schema.py, as the kernels' is (schema.c_struct_source)."""

from __future__ import annotations

import ctypes

from mvopt.engine import schema

__all__ = ["Ctx", "build_ctx"]


class Ctx(ctypes.Structure):
    """struct Ctx: the scalar counts (int64), then one pointer per column, in schema order."""

    _fields_ = [(s, ctypes.c_int64) for s in schema.SCALARS] + [(c.name, ctypes.c_void_p) for c in schema.COLUMNS]


def build_ctx(counts: dict[str, int], pointers: dict[str, int]) -> Ctx:
    """The Ctx of a batch: `counts` (every schema.SCALARS name) and `pointers` (every column's address)."""
    ctx = Ctx()
    for s in schema.SCALARS:
        setattr(ctx, s, int(counts[s]))
    for col in schema.COLUMNS:
        setattr(ctx, col.name, int(pointers[col.name]))
    return ctx
