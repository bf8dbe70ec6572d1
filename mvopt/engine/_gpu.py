"""GPU backend: the same kernel sources compiled by NVRTC through CuPy, run as a megakernel.

The batch tables are uploaded once (the packet slots are allocated and chained on the device,
never copied), the column addresses go to constant memory, the cooperative kernel runs up to
``chunk_iters`` iterations per launch (grid-wide barriers between phases, see
kernels/mv_cuda_main.cuh), the host only checks how many experiments are still running, and
the result columns come back once at the end. Compiled with ``--fmad=false`` so that results
are bit-identical to the CPU backend.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from mvopt.engine._cpu import build_ctx
from mvopt.engine.batch import RESULT_COLUMNS, Batch, scratch_arrays
from mvopt.engine.source import kernel_source
from mvopt.errors import BackendUnavailable

__all__ = ["GpuBackend", "gpu_available", "gpu_count"]

THREADS = 128


def gpu_count() -> int:
    """CUDA devices CuPy sees (0 without CuPy or a driver)."""
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return gpu_count() > 0


class GpuBackend:
    """Runs batches on one NVIDIA GPU."""

    name = "gpu"

    def __init__(self, device: int = 0, defines: dict[str, int] | None = None, launch: str | None = None) -> None:
        """`defines`: compile-time overrides of the kernels' tuning macros (MV_MIN_BLOCKS,
        MV_CACHE_PORTS), for measuring variants; results do not depend on them. `launch`:
        'coop' (one cooperative megakernel launch for many iterations, grid barriers between
        phases; the default) or 'graph' (one launch per phase, many iterations replayed as a
        CUDA graph); default from $MVOPT_GPU_LAUNCH, else 'coop'."""
        self.launch = launch or os.environ.get("MVOPT_GPU_LAUNCH", "coop")
        self.graph_used = False        # graph mode: whether this CuPy captured a CUDA graph
        if self.launch not in ("coop", "graph"):
            raise BackendUnavailable(f"GPU launch mode must be coop or graph, got {self.launch!r}")
        try:
            import cupy
        except ImportError:
            raise BackendUnavailable("the GPU backend needs CuPy: pip install 'mvopt[gpu-cuda13]' "
                                     "(or gpu-cuda12)") from None
        if not gpu_available():
            raise BackendUnavailable("the GPU backend found no CUDA device")
        self.cp = cupy
        self.device = device
        with cupy.cuda.Device(device):
            options = ("--fmad=false", "-std=c++17", f"-DMV_THREADS={THREADS}")
            options += tuple(f"-D{k}={int(v)}" for k, v in sorted((defines or {}).items()))
            if os.environ.get("MVOPT_LINEINFO") == "1":     # source lines for profilers (ncu)
                options += ("-lineinfo",)
            self.module = cupy.RawModule(code=kernel_source("cuda"), options=options,
                                         enable_cooperative_groups=True)
            self.kernel = self.module.get_function("mv_run_coop")
            self.ctx_symbol = self.module.get_global("mv_ctx")     # struct Ctx in constant memory
            # the per-phase kernels, from a module launched the ordinary way (full grids)
            self.phase_module = cupy.RawModule(code=kernel_source("cuda"), options=options)
            self.phases = [self.phase_module.get_function(f"mv_phase_{p}") for p in ("schedule", "network", "advance")]
            self.phase_ctx_symbol = self.phase_module.get_global("mv_ctx")
            props = cupy.cuda.runtime.getDeviceProperties(device)
            self.sms = int(props["multiProcessorCount"])
            try:
                per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.kernel.kernel.ptr, THREADS, 0)
            except Exception:
                per_sm = 1
            self.max_blocks = max(1, self.sms * int(per_sm))

    @staticmethod
    def _finished(status, total: int, max_iters: int | None, deadline_s: float | None, t_start: float) -> bool:
        """The host's only decision between launches: stop when no experiment runs any more, or
        at the iteration or wall-clock budget."""
        return (not (status == 0).any() or (max_iters is not None and total >= max_iters)
                or (deadline_s is not None and time.perf_counter() - t_start > deadline_s))

    def _run_coop(self, blocks: int, status, chunk_iters: int, max_iters: int | None,
                  deadline_s: float | None, t_start: float) -> int:
        """The megakernel: each cooperative launch runs up to `chunk_iters` iterations."""
        cp = self.cp
        out = cp.zeros(2, dtype=np.int64)
        total = 0
        while True:
            n = chunk_iters if max_iters is None else min(chunk_iters, max_iters - total)
            # kernels of a module built with enable_cooperative_groups launch cooperatively
            self.kernel((blocks,), (THREADS,), (np.int64(n), out))
            done = cp.cuda.Event(block=False)
            done.record()
            while not done.done:          # poll, so that other threads of this process keep the GIL
                time.sleep(0.0005)
            total += int(out[0].get())
            if self._finished(status, total, max_iters, deadline_s, t_start):
                return total

    def _run_graph(self, batch: Batch, status, chunk_iters: int, max_iters: int | None,
                   deadline_s: float | None, t_start: float) -> int:
        """Per-phase launches: `per_graph` iterations captured once as a CUDA graph and replayed
        until every experiment ended (iterations past an experiment's end do nothing to it)."""
        cp = self.cp
        node_blocks = max(1, -(-int(batch.counts["n_node"]) // THREADS))
        sizes = (node_blocks, node_blocks, max(1, -(-int(batch.counts["n_exp"]) // THREADS)))
        per_graph = max(1, min(64, chunk_iters))
        stream = cp.cuda.Stream(non_blocking=True)

        def iterations() -> None:      # on the current stream
            for _ in range(per_graph):
                for kernel, blocks in zip(self.phases, sizes):
                    kernel((blocks,), (THREADS,), ())

        with stream:
            try:
                stream.begin_capture()
                iterations()
                graph = stream.end_capture()
            except (AttributeError, RuntimeError):   # no graph capture in this CuPy: launch directly
                if stream.is_capturing():
                    stream.end_capture()
                graph = None
        self.graph_used = graph is not None
        total = 0
        while True:
            with stream:
                graph.launch() if graph is not None else iterations()
            stream.synchronize()
            total += per_graph
            if self._finished(status, total, max_iters, deadline_s, t_start):
                return total

    def batch_memory_limit(self) -> int:
        """Bytes one batch may take: a fraction of the device memory free now (after returning
        CuPy's cached blocks)."""
        from mvopt.engine.plan import GPU_MEMORY_FRACTION
        with self.cp.cuda.Device(self.device):
            self.cp.get_default_memory_pool().free_all_blocks()
            free, _ = self.cp.cuda.runtime.memGetInfo()
        return int(free * GPU_MEMORY_FRACTION)

    def run(self, batch: Batch, *, chunk_iters: int = 4096, max_iters: int | None = None,
            deadline_s: float | None = None) -> int:
        """Simulate the batch on the GPU; the batch's result columns receive the final state.
        `max_iters` / `deadline_s` (wall seconds) stop early even if experiments are still running
        (profiling, benchmarks with a time budget); `last_timing` holds the upload / kernel /
        download seconds. A launch runs at most `chunk_iters` iterations, so the host regains
        control (and an interrupted process releases the GPU) within a fraction of a second."""
        cp = self.cp
        with cp.cuda.Device(self.device):
            t0 = time.perf_counter()
            dev = {name: cp.asarray(a) if a.size else cp.zeros(1, a.dtype) for name, a in batch.cols.items()}
            dev.update(scratch_arrays(batch, cp))     # built on the device, never copied
            ctx = build_ctx(batch.counts, {name: a.data.ptr for name, a in dev.items()})
            for symbol in (self.ctx_symbol, self.phase_ctx_symbol):
                symbol.copy_from_host(ctypes.addressof(ctx), ctypes.sizeof(ctx))
            n_rows = max(int(batch.counts["n_node"]), int(batch.counts["n_exp"]))
            blocks = int(min(self.max_blocks, max(1, -(-n_rows // THREADS))))
            status = dev["exp_status"]
            cp.cuda.Device().synchronize()
            t1 = time.perf_counter()
            if self.launch == "graph":
                total = self._run_graph(batch, status, chunk_iters, max_iters, deadline_s, t1)
            else:
                total = self._run_coop(blocks, status, chunk_iters, max_iters, deadline_s, t1)
            t2 = time.perf_counter()
            for name in RESULT_COLUMNS:
                if batch.cols[name].size:
                    batch.cols[name][...] = dev[name].get()
            del dev                           # the device memory goes back to CuPy's pool now
            self.last_timing = {"upload_s": t1 - t0, "kernel_s": t2 - t1, "download_s": time.perf_counter() - t2,
                                "blocks": blocks, "threads_per_block": THREADS, "launch": self.launch}
            return total
