"""The one place that knows which backend classes exist: the CPU's and the GPU's."""

from __future__ import annotations

from mvopt.errors import BackendUnavailable

__all__ = ["resolve_backend", "get_backend"]

_BACKENDS: dict[tuple, object] = {}


def resolve_backend(name: str = "auto") -> str:
    """'gpu' or 'cpu' for a requested backend; 'auto' picks the GPU when CuPy sees one."""
    name = name.partition(":")[0]
    if name == "auto":
        from mvopt.engine._gpu import gpu_available
        return "gpu" if gpu_available() else "cpu"
    if name not in ("cpu", "gpu"):
        raise BackendUnavailable(f"unknown backend {name!r} (choose cpu, gpu or auto)")
    return name


def get_backend(name: str = "cpu", device: int = 0, threads: int | None = None):
    """The backend object ('cpu', 'gpu' or 'auto'; a GPU by device number, a CPU backend by its
    thread count); compiled once per process."""
    name = resolve_backend(name)
    key = (name, device if name == "gpu" else 0, threads if name == "cpu" else None)
    if key not in _BACKENDS:
        if name == "cpu":
            from mvopt.engine._cpu import CpuBackend
            _BACKENDS[key] = CpuBackend(threads=threads)
        else:
            from mvopt.engine._gpu import GpuBackend
            _BACKENDS[key] = GpuBackend(device=device)
    return _BACKENDS[key]
