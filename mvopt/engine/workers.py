"""Backend specs: where experiments run.

A *backend spec* names where experiments run: ``cpu``, ``gpu`` (every visible GPU), ``gpu:0,1``
(those devices), ``auto`` (the GPUs when CuPy sees one, else the CPU; one GPU is raced by the
CPU's cores) or ``cpu:N`` (N CPU workers sharing the cores; for testing the splitting);
``gpu:0+cpu`` (or ``gpu+cpu`` on a one-GPU machine) runs on that GPU while the CPU's cores race
it on its slowest experiments (:mod:`mvopt.engine.race`; ``cpu+cpu`` does the same with a
one-thread CPU worker, for testing).
"""

from __future__ import annotations

from dataclasses import dataclass

from mvopt.engine.backends import resolve_backend
from mvopt.errors import BackendUnavailable
from mvopt.procpool import usable_cores

__all__ = ["Worker", "parse_backend", "split_race", "races", "describe_backend"]


@dataclass(frozen=True)
class Worker:
    """One place experiments run: the CPU (with `threads` cores) or one GPU."""

    kind: str                 # "cpu" or "gpu"
    device: int = 0
    threads: int | None = None

    def __str__(self) -> str:
        return f"gpu:{self.device}" if self.kind == "gpu" else "cpu"


def split_race(spec: str) -> tuple[str, bool]:
    """(the spec without it, whether it ends in ``+cpu``): the CPU's cores race the one worker
    of the spec on its slowest experiments (:mod:`mvopt.engine.race`)."""
    base, plus, helper = spec.partition("+")
    if plus and helper != "cpu":
        raise BackendUnavailable(f"backend {spec!r}: only '+cpu' may follow a backend (the CPU's cores "
                                 f"racing it on its slowest experiments), not {helper!r}")
    return base, bool(plus)


def races(spec: str) -> bool:
    """Whether the CPU's cores race the spec's worker: asked for (``+cpu``), or ``auto`` on a
    machine with one GPU, a spare core and a C++ compiler (an optimizer's generation ends sooner:
    docs/decisions/0009-cpu-racing-the-gpu.md), unless $MVOPT_AUTO_RACE=0. ``gpu`` alone never races."""
    import os
    base, explicit = split_race(spec)
    if explicit:
        return True
    if base.partition(":")[0] != "auto" or os.environ.get("MVOPT_AUTO_RACE", "1") == "0":
        return False
    workers = parse_backend(base)
    return len(workers) == 1 and workers[0].kind == "gpu" and usable_cores() >= 2 and _cpu_compiles()


def _cpu_compiles() -> bool:
    """Whether the CPU backend can be built here (it needs a C++ compiler)."""
    from mvopt.engine.cxx import compiler as _compiler
    try:
        _compiler()
    except BackendUnavailable:
        return False
    return True


def parse_backend(spec: str) -> list[Worker]:
    """The workers a backend spec names (see the module docstring)."""
    spec, race = split_race(spec)
    name, _, arg = spec.partition(":")
    kind = resolve_backend(name)
    if kind == "gpu":
        from mvopt.engine._gpu import gpu_count
        n = gpu_count()
        if n == 0:
            raise BackendUnavailable(f"backend {spec!r}: no CUDA GPU found (the GPU backend needs CuPy "
                                     "and an NVIDIA GPU; use --backend cpu or auto)")
        devices = _int_list(spec, arg) if arg else list(range(n))
        bad = [d for d in devices if not 0 <= d < n]
        if bad:
            raise BackendUnavailable(f"backend {spec!r}: no GPU {bad[0]} (this machine has {n}: 0..{n - 1})")
        if race and len(devices) != 1:
            raise BackendUnavailable(f"backend {spec}+cpu: the CPU races one GPU, this names {len(devices)} "
                                     "(e.g. gpu:0+cpu)")
        return [Worker("gpu", d) for d in devices]
    if not arg:
        return [Worker("cpu", 0, 1 if race else None)]
    (n,) = _int_list(spec, arg)
    if n < 1:
        raise BackendUnavailable(f"backend {spec!r}: the number of CPU workers must be >= 1")
    return [Worker("cpu", 0, max(1, usable_cores() // n)) for _ in range(n)]


def _int_list(spec: str, arg: str) -> list[int]:
    try:
        return [int(x) for x in arg.split(",")]
    except ValueError:
        raise BackendUnavailable(f"backend {spec!r}: expected comma-separated integers after ':', got {arg!r}") from None


def describe_backend(spec: str) -> str:
    """What a backend spec resolves to on this machine, for the user ('auto' says its choice)."""
    workers = parse_backend(spec)
    if workers[0].kind == "gpu":
        what = f"gpu ({len(workers)} GPU{'s' if len(workers) > 1 else ''}: {','.join(str(w.device) for w in workers)})"
    else:
        what = "cpu" if len(workers) == 1 else f"cpu ({len(workers)} workers)"
    if races(spec):
        what += ", raced by the CPU's cores on its slowest experiments"
    return f"{spec} -> {what}" if spec.partition(":")[0].partition("+")[0] == "auto" else what
