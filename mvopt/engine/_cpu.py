"""CPU backend: the kernels compiled by the host C++ compiler, loaded with ctypes.

The shared library is cached under ``$MVOPT_CACHE`` (default ``~/.cache/mvopt``) by the hash of
the assembled source and the compiler command, so an edit to any kernel header rebuilds it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Callable, Sequence

import numpy as np

from mvopt.engine import backend_defaults, schema
from mvopt.engine.backend_defaults import CpuDefaults, check_defines
from mvopt.engine.batch import ST_CANCELLED, ST_RUN, STATE_COLUMNS, Batch, Steer, scratch_words
from mvopt.engine.progress import backend_counts
from mvopt.engine.ctx import Ctx, build_ctx
from mvopt.engine.cxx import FLAGS, compiler, openmp_works, shared_library
from mvopt.engine.source import kernel_source
from mvopt.errors import BackendUnavailable
from mvopt.procpool import usable_cores

__all__ = ["SWITCH_SCHEDULES", "CpuBackend"]

# How the CPU runs a switch's window: 'lanes' (port by port when no decision of the window can
# depend on the order of its ports' events, else the serial loop: the GPU's groups kernel takes
# the same decisions) or 'serial' (always the serial loop, as the GPU's graph kernel runs it; for
# tests that compare the two). Results do not depend on it.
SWITCH_SCHEDULES = ("lanes", "serial")
def experiment_order(batch: Batch) -> np.ndarray:
    """The batch's experiments in the order the CPU's threads take them: costliest first
    (sizing.experiment_cost), so that the last one a thread starts is a short one and the threads
    end together; ties in batch order. Results do not depend on it."""
    from mvopt.engine.sizing import experiment_cost
    costs = [experiment_cost(exp) for exp in batch.experiments]
    return np.array(sorted(range(len(costs)), key=lambda i: (-costs[i], i)), dtype=np.int64)


class CpuBackend:
    """Runs batches on the CPU (all cores through OpenMP when the compiler supports it)."""

    name = "cpu"

    def __init__(self, threads: int | None = None, defines: dict[str, int] | None = None,
                 switch_schedule: str = "lanes", defaults: CpuDefaults | None = None) -> None:
        """`threads`: OpenMP threads at most (default $OMP_NUM_THREADS, else every usable core).
        `defines`: kernel constants (backend_defaults.KERNEL_DEFINES: the pull-vs-lock ablation,
        the switch widths tests shrink). `switch_schedule`: SWITCH_SCHEDULES. `defaults`: the
        backend's row of the table (default: backend_defaults.CPU when a run starts). Results
        depend on none of them."""
        if switch_schedule not in SWITCH_SCHEDULES:
            raise ValueError(f"switch_schedule={switch_schedule!r}: expected one of {', '.join(SWITCH_SCHEDULES)}")
        self.switch_lanes = int(switch_schedule == "lanes")
        self._defaults = defaults
        defines = check_defines(defines)
        cxx = compiler()
        self.openmp = openmp_works(cxx)
        flags = [*FLAGS, *(["-fopenmp"] if self.openmp else []), *(f"-D{k}={v}" for k, v in sorted(defines.items()))]
        lib = shared_library(kernel_source("cpu"), "mvopt_cpu", "the CPU engine", cxx, flags)
        self.lib = ctypes.CDLL(str(lib))
        self.lib.mv_run.restype = ctypes.c_int64
        self.lib.mv_run.argtypes = [ctypes.POINTER(Ctx), ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
        self.lib.mv_run_by_experiment.restype = ctypes.c_int64
        self.lib.mv_run_by_experiment.argtypes = [ctypes.POINTER(Ctx), ctypes.c_int64, ctypes.c_int64,
                                                  ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
        for f in ("mv_sizeof_pkt", "mv_sizeof_int"):
            getattr(self.lib, f).restype = ctypes.c_int64
        if self.lib.mv_sizeof_pkt() != schema.PKT_DTYPE.itemsize or self.lib.mv_sizeof_int() != schema.INT_DTYPE.itemsize:
            raise BackendUnavailable("kernel packet layout differs from schema.PKT_DTYPE (a bug)")
        env = os.environ.get("OMP_NUM_THREADS", "")
        self.max_threads = threads or (int(env) if env.isdigit() and int(env) > 0 else usable_cores())
        if not self.openmp:
            self.max_threads = 1
        self._local = threading.local()   # per-thread reusable scratch (workers may share a backend)

    @property
    def defaults(self) -> CpuDefaults:
        """This backend's row of the table of backend defaults."""
        return self._defaults or backend_defaults.CPU

    def _scratch(self, batch: Batch) -> dict:
        """Packet slots for a run, reused from this thread's previous run when large enough: the
        kernels never read a slot before writing it (pools hand out never-used slots first), so
        reuse needs no clearing, and a sequence of batches (an optimizer's generations) stops
        paying the page faults of fresh memory."""
        need = scratch_words(batch.counts)
        total = sum(need.values())
        buf = getattr(self._local, "scratch", None)
        if buf is None or buf.size < total:
            buf = self._local.scratch = np.empty(max(total, 1), np.int64)
        out, at = {}, 0
        for name, n in need.items():
            out[name] = buf[at:at + n]
            at += n
        return out

    def launch_parts(self, nodes: Sequence[int]) -> list[list[int]]:
        """One part: every experiment runs at its own pace on the CPU (see GpuBackend.launch_parts)."""
        return [list(range(len(nodes)))]

    def prepare(self, batch: Batch) -> None:
        """Nothing to do: the CPU's kernels are compiled (or loaded) when the backend is made."""

    def batch_memory_limit(self) -> int | None:
        """Bytes one batch may take: no limit on the CPU (host memory is the user's to manage)."""
        return None

    def threads_for(self, batch: Batch) -> int:
        """Threads worth starting: one per experiment when there are several (experiment-major
        order), else about one per `defaults.nodes_per_thread` nodes of the single experiment; at
        most max_threads."""
        return self.threads_for_counts(int(batch.counts["n_exp"]), int(batch.counts["n_node"]))

    def threads_for_counts(self, n_exp: int, n_node: int) -> int:
        if n_exp > 1:
            return max(1, min(self.max_threads, n_exp))
        return max(1, min(self.max_threads, n_node // self.defaults.nodes_per_thread))

    def run(self, batch: Batch, *, chunk_iters: int | None = None, max_iters: int | None = None,
            progress: Callable[[int, int], None] | None = None, steer: Steer | None = None,
            resumable: bool = True) -> int:
        """Simulate the batch in place until every experiment ended (or `max_iters` iterations,
        for benchmarks of partial runs); returns iterations run. `progress(done, windows, slowest_ps,
        ended_ps)` is called between chunks of `defaults.progress_windows` windows
        (progress.backend_counts: experiments ended, furthest window, the least simulated time of
        a running experiment, the median end of the ended ones); `steer(statuses)` between chunks of `defaults.steer_windows`, and the experiments (batch indices) it
        returns that still run are cancelled (engine/race.py). A run stopped early leaves its
        packets in flight on the batch (`Batch.scratch`: this thread's slots, handed over), so that
        running it again continues it; `resumable=False` keeps the slots for the thread's next run
        instead (a benchmark that stops for good)."""
        chunk_iters = chunk_iters or self.defaults.chunk_windows
        if progress is not None:
            chunk_iters = min(chunk_iters, self.defaults.progress_windows)
        if steer is not None:
            chunk_iters = min(chunk_iters, self.defaults.steer_windows)
        # a stopped run's packets, else this thread's reusable slots (kept alive until the run ends)
        resumed = batch.scratch is not None
        scratch = batch.scratch if resumed else self._scratch(batch)
        # the state columns change in place (also in a run that is interrupted): a later upload
        # (the GPU's) must copy them, not zero them
        batch.zero_columns = batch.zero_columns - frozenset(STATE_COLUMNS)
        iters = self._run(batch, scratch, chunk_iters, max_iters, progress, steer)
        batch.gpu_reports_stale = True
        running = bool((batch.cols["exp_status"] == ST_RUN).any())
        if resumable and running and not resumed:
            # the batch takes this thread's slots with it (no copy); the thread's next run allocates anew
            self._local.scratch = None
        batch.scratch = scratch if resumable and running else None
        return iters

    def _run(self, batch: Batch, scratch: dict, chunk_iters: int, max_iters: int | None,
             progress: Callable[[int, int], None] | None, steer: Steer | None) -> int:
        arrays = {**batch.cols, **scratch}
        for col in schema.COLUMNS:
            if not col.doc.startswith("scratch"):
                arr = arrays[col.name]
                assert arr.flags.c_contiguous and arr.dtype == schema.numpy_dtype(col), col.name
        ctx = build_ctx(batch.counts, {name: a.ctypes.data for name, a in arrays.items()})
        total = 0
        threads = self.threads_for(batch)
        # several experiments: each thread runs whole experiments (cache locality); one
        # experiment: all threads share its nodes, window after window (mv_run, which takes one only)
        if int(batch.counts["n_exp"]) > 1:
            order = experiment_order(batch)
            if order.size != int(batch.counts["n_exp"]) or order.dtype != np.int64:
                raise AssertionError(f"experiment order of {order.size} for {batch.counts['n_exp']} experiments")
            order_ptr = order.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))

            def run(ctx_ref, n, threads):
                return self.lib.mv_run_by_experiment(ctx_ref, n, threads, self.switch_lanes, order_ptr)
        else:
            def run(ctx_ref, n, threads):
                return self.lib.mv_run(ctx_ref, n, threads, self.switch_lanes)
        status = batch.cols["exp_status"]
        while True:
            if steer is not None:       # before every chunk, the first included (as the GPU polls)
                for j in steer(status.copy()):
                    if status[j] == ST_RUN:
                        status[j] = ST_CANCELLED
                if (status != 0).all():
                    return total
            n = run(ctypes.byref(ctx), chunk_iters if max_iters is None else min(chunk_iters, max_iters - total), threads)
            total += n
            if (status != 0).all() or (max_iters is not None and total >= max_iters):
                if steer is not None:
                    steer(status.copy())    # the final statuses (what ended here), as the GPU reports them
                return total
            if progress is not None:
                progress(*backend_counts(status, batch.cols["exp_iter"], batch.cols["exp_T_ps"]))
