"""Building many configurations at once, in worker processes when there are many."""

from __future__ import annotations

from typing import Sequence

from mvopt.build.experiment import build
from mvopt.config import ExperimentConfig
from mvopt.errors import ConfigError, InfeasibleError, InputFileError

__all__ = ["build_all", "build_outcome", "build_workers", "PARALLEL_BUILD_MIN"]

# Building an experiment is Python and numpy on one core (topology, routes, task graph): for a
# GPU generation of 1,000 configurations it takes minutes on one core while the simulation takes
# seconds. From this many configurations on, they are built in worker processes.
PARALLEL_BUILD_MIN = 16


def _build_pool_size() -> int | None:
    """$MVOPT_BUILD_WORKERS (1 = build in this process), else None (one per core)."""
    import os
    env = os.environ.get("MVOPT_BUILD_WORKERS", "")
    if not env:
        return None
    if not env.isdigit() or int(env) < 1:
        raise ConfigError("MVOPT_BUILD_WORKERS", "must be a whole number >= 1", env)
    return int(env)


def build_workers(n_configs: int) -> int:
    """Processes that build `n_configs` configurations: $MVOPT_BUILD_WORKERS if set (1 = build in
    this process), else one per usable core when there are at least PARALLEL_BUILD_MIN of them."""
    from mvopt.procpool import usable_cores
    size = _build_pool_size()
    n = size if size is not None else usable_cores() if n_configs >= PARALLEL_BUILD_MIN else 1
    return max(1, min(n, n_configs))


def build_outcome(cfg: ExperimentConfig) -> tuple:
    """(Built, None, 0) or (None, reason, violation) for a configuration that cannot be built
    (invalid layout, does not fit in GPU memory, a bad input file); other errors propagate."""
    try:
        return build(cfg), None, 0.0
    except InfeasibleError as e:
        return None, str(e), _violation(cfg, e)
    except (ConfigError, InputFileError) as e:
        return None, str(e), 1.0


def build_all(configs: Sequence[ExperimentConfig]) -> list[tuple]:
    """:func:`build_outcome` of every configuration, in order, in parallel worker processes
    (kept between calls) when there are many (:func:`build_workers`). The result does not depend
    on how many processes built it."""
    n = build_workers(len(configs))
    if n == 1:
        return [build_outcome(c) for c in configs]
    from concurrent.futures.process import BrokenProcessPool

    from mvopt.procpool import drop_pool, get_pool, usable_cores
    from mvopt.shmtransfer import sweep_stale, unpack_all
    size = _build_pool_size() or usable_cores()     # one pool for every generation, whatever its size
    sweep_stale()
    try:
        # the experiments come back through shared memory (mvopt/shmtransfer.py), not the pipe
        return unpack_all(get_pool("build", size).map(_build_outcome_packed, configs,
                                                      chunksize=max(1, len(configs) // (4 * n))))
    except BrokenProcessPool:
        drop_pool("build", size)   # a worker died (killed, out of memory): the next call starts fresh ones
        raise


def _build_outcome_packed(cfg: ExperimentConfig):
    """:func:`build_outcome` in a worker process, packed for the main one."""
    from mvopt.shmtransfer import pack
    return pack(build_outcome(cfg))


def _violation(cfg: ExperimentConfig, err: Exception) -> float:
    """peak / capacity - 1 for a training configuration that does not fit, else 1."""
    if cfg.workload.kind != "training" or "GPU memory" not in str(err):
        return 1.0
    try:
        from mvopt.workload import get_gpu, get_model, peak_memory

        w = cfg.workload
        model = get_model(w.model)
        if w.seq_len is not None:
            model = model.with_seq_len(w.seq_len)
        pk = peak_memory(model, cfg.parallelism, get_gpu(cfg.cluster.gpu), precision=w.precision,
                         flash_attention=w.flash_attention, dropout=w.dropout,
                         reserve_bytes=w.memory_reserve_gib * 2**30)
        return max(pk.total_bytes / pk.capacity_bytes - 1.0, 1e-9)
    except Exception:   # noqa: BLE001 - the violation is advisory
        return 1.0
