"""Assembly of the single-source kernels into one translation unit, and its cache key.

Headers are inlined in a fixed order (so no compiler ever resolves an ``#include`` on its own,
and the hash of the assembled text covers every header: editing any of them changes the key).
What Python declares reaches the kernels the same way: ``struct Ctx`` and the ``CC_*`` enum are
generated (:mod:`mvopt.engine.schema`), and generated ``static_assert``s check the hand-written
enums that must mirror Python's tables.
"""

from __future__ import annotations

import hashlib
from importlib import resources

from mvopt.engine.schema import c_check_source, c_enum_source, c_struct_source

__all__ = ["kernel_source", "source_hash"]

# Order matters: types, then the generated struct Ctx and enums, the common definitions and the
# checks of their enums, then systems in dependency order.
_PARTS = ("mv_types.cuh", "@ctx", "@enums", "mv_common.cuh", "@checks", "mv_sched.cuh", "mv_cc.cuh",
          "mv_switch.cuh", "mv_host.cuh", "mv_window.cuh", "mv_lanes.cuh", "mv_step.cuh")
_GENERATED = {"@ctx": c_struct_source, "@enums": c_enum_source, "@checks": c_check_source}


def _read(name: str) -> str:
    return resources.files("mvopt.engine").joinpath("kernels", name).read_text()


def kernel_source(backend: str) -> str:
    """The whole kernel program for ``backend`` ('cpu' or 'cuda')."""
    macro = {"cpu": "MV_BACKEND_CPU", "cuda": "MV_BACKEND_CUDA"}[backend]
    out = [f"#define {macro} 1\n", _strip(_read("mv_backend.cuh"))]
    for part in _PARTS:
        out.append(_GENERATED[part]() if part in _GENERATED else _strip(_read(part)))
    out.append(_strip(_read("mv_cpu_main.cpp" if backend == "cpu" else "mv_cuda_main.cuh")))
    return "\n".join(out)


def _strip(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.strip() != "#pragma once") + "\n"


def source_hash(text: str, *extra: str) -> str:
    h = hashlib.sha256(text.encode())
    for x in extra:
        h.update(b"\0" + x.encode())
    return h.hexdigest()[:20]
