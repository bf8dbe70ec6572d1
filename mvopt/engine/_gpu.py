"""GPU backend: the same kernel sources compiled by NVRTC through CuPy, run as a megakernel.

The batch tables are uploaded once (the packet slots are allocated on the device, never
copied; all-zero columns are set there), the column addresses go to constant memory, many
windows of every experiment run per host round trip (kernels/mv_cuda_main.cuh: the groups
megakernel, or the graph kernels for experiments too wide for a block), the host only checks
whether experiments are still running, and the result columns come back once at the end.
Compiled with ``--fmad=false`` so that results are bit-identical to the CPU backend, once per
backend, on its first use. How it runs (block sizes, slices, budgets) comes from backend_defaults.GPU.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import sys
import time
from typing import Callable, Sequence

import numpy as np

from mvopt.engine import backend_defaults
from mvopt.engine.backend_defaults import LAUNCH_MODES, GpuDefaults, check_defines
from mvopt.engine.batch import (RESULT_COLUMNS, ST_CANCELLED, ST_RUN, STATE_COLUMNS, Batch, Steer, gpu_report_columns,
                                 node_order, scratch_arrays, scratch_words)
from mvopt.engine.ctx import build_ctx
from mvopt.engine.progress import backend_counts
from mvopt.engine.source import kernel_source
from mvopt.errors import BackendUnavailable

__all__ = ["GpuBackend", "Kernels", "experiment_groups", "gpu_available", "gpu_count", "launch_parts", "nvrtc_options"]


def _blocks(rows: int, threads: int) -> int:
    """Blocks of `threads` threads that cover `rows` rows (at least one)."""
    return max(1, -(-int(rows) // threads))


def nvrtc_options(defines: dict[str, int] | None = None, defaults: GpuDefaults | None = None) -> tuple[str, ...]:
    """The compiler options of the GPU kernels (experiments/gpu_sass.py compiles with them too):
    no fused multiply-add (the CPU's results, bit for bit), the block sizes of the table of
    backend defaults, and `defines` (backend_defaults.KERNEL_DEFINES)."""
    d = defaults or backend_defaults.GPU
    options = ("--fmad=false", "-std=c++17", f"-DMV_THREADS={d.threads}", f"-DMV_GROUP_THREADS={d.group_threads_max}")
    return options + tuple(f"-D{k}={v}" for k, v in sorted(check_defines(defines).items()))


@dataclasses.dataclass
class Kernels:
    """The compiled module of the kernels and what the host needs of it."""

    module: object
    phases: dict[str, object]          # the graph mode's kernels: 'window', 'advance'
    groups: object                     # the groups megakernel
    ctx_symbol: object                 # struct Ctx in constant memory
    window_resident_blocks: int        # the graph mode's window kernel: blocks resident at once


def launch_setting() -> str | None:
    """$MVOPT_GPU_LAUNCH: the megakernel-vs-launches ablation ('groups' or 'graph' for every
    batch; 'auto' or unset: the table's choice by experiment size). Checked by GpuDefaults."""
    return os.environ.get("MVOPT_GPU_LAUNCH") or None


def experiment_groups(nodes: np.ndarray, threads: int, limit: int) -> tuple[np.ndarray, int] | None:
    """The groups launch mode's blocks: consecutive experiments (`nodes[e]` nodes each) packed
    greedily into blocks of `threads` threads (more, in warps, if an experiment needs them), as
    offsets: block b runs experiments offsets[b] .. offsets[b + 1]. Returns (offsets, threads),
    or None if an experiment has more than `limit` nodes."""
    nodes = np.asarray(nodes, np.int64)
    widest = int(nodes.max()) if nodes.size else 1
    if widest > limit:
        return None
    threads = min(max(threads, -(-widest // 32) * 32), -(-limit // 32) * 32)
    offsets, used = [0], 0
    for e, n in enumerate(nodes.tolist()):
        if used + n > threads:
            offsets.append(e)
            used = 0
        used += n
    offsets.append(int(nodes.size))
    return np.asarray(offsets, np.int64), threads


def launch_parts(nodes: Sequence[int], launch: str, defaults: GpuDefaults) -> list[list[int]]:
    """Experiments (given by their node counts) in the parts that run as separate sub-batches:
    under 'auto', those that run as 'groups' (each experiment at its own pace) and then the others
    ('graph': every experiment one window per launch pair, in lockstep), so that a small
    experiment never waits for a large one's windows; under a fixed launch mode, one part."""
    if launch != "auto":
        return [list(range(len(nodes)))]
    bound = min(defaults.auto_groups_nodes_max, defaults.group_threads_max)
    small = [i for i, n in enumerate(nodes) if n <= bound]
    large = [i for i, n in enumerate(nodes) if n > bound]
    return [part for part in (small, large) if part]


def first_window(status: np.ndarray, iters: np.ndarray) -> int:
    """The window from which a run's cap rises: the least window count of the experiments still
    running (a run continued after a stop may hold experiments that ended long before; 0 if none
    runs)."""
    running = status == ST_RUN
    return int(iters[running].min()) if running.any() else 0


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

    def __init__(self, device: int = 0, defines: dict[str, int] | None = None, launch: str | None = None,
                 defaults: GpuDefaults | None = None) -> None:
        """`defines`: kernel constants (backend_defaults.KERNEL_DEFINES: the pull-vs-lock
        ablation, the switch widths tests shrink). `launch`: how a window's phases are separated
        (backend_defaults.LAUNCH_MODES; default $MVOPT_GPU_LAUNCH, else the table's 'auto':
        'groups' where every experiment has at most `defaults.auto_groups_nodes_max` nodes, else
        'graph'; `launch_parts` splits a batch so; a batch with an experiment wider than
        `defaults.group_threads_max` runs as 'graph' in any case). `defaults`: the backend's row of the table of backend defaults. Results depend on
        none of them."""
        d = defaults or backend_defaults.GPU
        try:
            wanted = launch or launch_setting()
            self.defaults = dataclasses.replace(d, launch=wanted) if wanted else d
            options = nvrtc_options(defines, self.defaults)
        except ValueError as e:
            raise BackendUnavailable(str(e)) from None
        self.launch = self.defaults.launch
        self.graph_used = False        # graph mode: whether this CuPy captured a CUDA graph
        try:
            import cupy
        except ImportError:
            raise BackendUnavailable("the GPU backend needs CuPy: pip install 'mvopt[gpu-cuda13]' "
                                     "(or gpu-cuda12)") from None
        if not gpu_available():
            raise BackendUnavailable("the GPU backend found no CUDA device")
        self.cp = cupy
        self.device = device
        self.threads = self.defaults.threads
        self.options = options
        self.compiled: Kernels | None = None   # on the first prepare
        with cupy.cuda.Device(device):
            self.sms = int(cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"])

    def prepare(self, batch: Batch) -> Kernels:
        """The kernels that run `batch` (one module, the same for every batch), compiled now if this
        backend has not yet (CuPy keeps the result on disk: a later process loads it): a caller
        that times runs calls it first, so that the compile is not run time."""
        if self.compiled is None:
            cupy = self.cp
            # (the first load of a version compiles for tens of seconds; CuPy keeps the result)
            print(f"mvopt: loading the GPU kernels on device {self.device} (compiled on a version's first use) ...",
                  file=sys.stderr, flush=True)
            with cupy.cuda.Device(self.device):
                module = cupy.RawModule(code=kernel_source("cuda"), options=self.options)
                phases = {p: module.get_function(f"mv_phase_{p}") for p in ("window", "advance")}
                per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(phases["window"].kernel.ptr,
                                                                                    self.threads, 0)
                self.compiled = Kernels(module, phases, module.get_function("mv_run_groups"),
                                        module.get_global("mv_ctx"), max(1, self.sms * int(per_sm)))
        return self.compiled

    @staticmethod
    def _poll(status, iters, cap: int, progress: Callable[..., None] | None,
              steer: Steer | None, clock) -> bool:
        """Whether an experiment still runs and has windows left below `cap`, after telling
        `progress` (experiments ended, furthest window) and letting `steer` cancel experiments
        (engine/race.py). On the host (here and in _run_launches): CuPy's element-wise
        operations would be compiled at their first use in a process (seconds on a fresh
        machine)."""
        st, it = status.get(), iters.get()
        if steer is not None:
            cancelled = False
            for j in steer(st):
                if st[j] == ST_RUN:
                    status[j:j + 1].set(np.array([ST_CANCELLED], status.dtype))   # a copy, no kernel
                    st[j] = ST_CANCELLED
                    cancelled = True
            if cancelled:      # before the next launch, which may be on another stream
                import cupy
                cupy.cuda.runtime.deviceSynchronize()
        if progress is not None:
            progress(*backend_counts(st, it, clock.get()))
        return bool(((st == 0) & (it < cap)).any())

    def _wait(self) -> None:
        """Wait for the current stream, polling, so that other threads of this process keep the GIL."""
        done = self.cp.cuda.Event(block=False)
        done.record()
        while not done.done:
            time.sleep(0.0005)

    def _run_launches(self, launch_to: Callable[[int], None], status, iters, start: int, cap_total: int,
                      chunk_iters: int, deadline_s: float | None, t_start: float,
                      progress: Callable[..., None] | None, steer: Steer | None = None, clock=None) -> None:
        """The groups kernel, launch after launch until no experiment runs any more or the budget
        is spent. `launch_to(cap)` runs experiments up to window `cap`, raised by `chunk` per
        launch, adapted so that a launch takes a fraction of a second (the host regains control,
        and an interrupted process releases the GPU, within about a second; a launch also stops
        on its own time budget). A launch that moved no experiment forward is a bug in the
        kernels: an error, never a hang."""
        cap, chunk = start, max(1, chunk_iters)
        windows = iters.get()
        while self._poll(status, iters, cap_total, progress, steer, clock):
            cap = min(cap_total, cap + chunk)
            t = time.perf_counter()
            launch_to(cap)
            self._wait()
            dt = time.perf_counter() - t
            before, windows = windows, iters.get()
            if (windows == before).all():
                raise RuntimeError("GPU groups launch made no progress (a bug in the kernels)")
            if deadline_s is not None and time.perf_counter() - t_start > deadline_s:
                return
            if dt < 0.1:
                chunk = min(chunk * 4, 1 << 16)
            elif dt > 1.0:
                chunk = max(16, chunk // 2)

    def _groups_resident(self, kernel, threads: int, smem_bytes: int) -> int:
        """Blocks of a groups kernel resident at once, with this much dynamic shared memory."""
        per_sm = int(self.cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads,
                                                                                   smem_bytes))
        return max(1, self.sms * per_sm)

    def _groups_launcher(self, kernel, offsets: np.ndarray, threads: int, status,
                         iters) -> tuple[Callable[[int], None], int]:
        """`launch(cap)` for the groups `kernel` (kernels/mv_cuda_main.cuh: a resident grid taking
        slices of groups from a queue), and its blocks. One slice per group when the groups fit
        the grid, else slices of `defaults.group_slice_windows` windows, enough for every running
        experiment to reach `cap` (`status`, `iters`: the device's columns)."""
        cp, d = self.cp, self.defaults
        n_groups = len(offsets) - 1
        acc_words = 4 * int(np.diff(offsets).max())      # reports: four per experiment of the largest group
        smem = 8 * acc_words
        threads = -(-threads // 32) * 32   # the switch lanes take their tasks by whole warps (mv_cuda_main.cuh)
        resident = self._groups_resident(kernel, threads, smem)
        blocks = min(n_groups, resident)
        group_exp = cp.asarray(offsets)
        queue, done = cp.zeros(1, np.uint64), cp.zeros(n_groups, np.int64)

        def launch(cap: int) -> None:
            if n_groups <= resident:
                slice_windows, slices = 1 << 62, n_groups
            else:
                # enough turns for the experiment furthest behind (one a budget stopped early)
                st, it = status.get(), iters.get()
                lowest = int(it[st == ST_RUN].min()) if (st == ST_RUN).any() else cap
                slice_windows = d.group_slice_windows
                slices = n_groups * max(1, -(-(cap - lowest) // slice_windows))
            stream = cp.cuda.get_current_stream().ptr
            cp.cuda.runtime.memsetAsync(queue.data.ptr, 0, queue.nbytes, stream)
            cp.cuda.runtime.memsetAsync(done.data.ptr, 0, done.nbytes, stream)
            kernel((blocks,), (threads,), (np.int64(cap), group_exp, np.int64(n_groups), np.int64(slice_windows),
                                           np.int64(slices), queue, done, np.int64(d.launch_budget_ns),
                                           np.int64(acc_words)),
                   shared_mem=smem)
        return launch, blocks

    def _steals(self, n_node: int, resident_blocks: int) -> bool:
        """Whether the graph mode's window kernel (`resident_blocks` of it fit at once) takes rows
        from a counter on a resident grid: when one wave of blocks does not cover the batch's nodes
        (a batch of one wave, e.g. idle windows, gains nothing from it)."""
        return n_node > resident_blocks * self.threads

    def _run_graph(self, k: Kernels, batch: Batch, status, iters, cap_total: int, chunk_iters: int,
                   deadline_s: float | None, t_start: float, progress: Callable[..., None] | None,
                   steer: Steer | None = None, clock=None) -> int:
        """Per-phase launches: `per_graph` iterations captured once as a CUDA graph and replayed
        until every experiment ended (iterations past an experiment's end do nothing to it).
        Returns the window kernel's blocks."""
        cp, d = self.cp, self.defaults
        cap = np.int64(cap_total)
        n_node, n_exp = int(batch.counts["n_node"]), int(batch.counts["n_exp"])
        # the window kernel's row counter (steal), reset by every advance
        next_row = cp.zeros(1, dtype=np.uint64)
        steal = self._steals(n_node, k.window_resident_blocks)
        window_blocks = _blocks(n_node, self.threads)
        if steal:
            window_blocks = min(window_blocks, self.sms * d.steal_blocks_per_sm, k.window_resident_blocks)
        launches = [(k.phases["window"], window_blocks, (cap, next_row, np.int32(steal))),
                    (k.phases["advance"], _blocks(n_exp, self.threads), (cap, next_row))]
        per_graph = max(1, min(d.graph_windows, chunk_iters))
        stream = cp.cuda.Stream(non_blocking=True)

        def iterations() -> None:      # on the current stream
            for _ in range(per_graph):
                for kernel, grid, args in launches:
                    kernel((grid,), (self.threads,), args)

        graph = None
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
        # replays between two polls of the host: doubled while they take little time, so that a
        # run of cheap windows pays one poll (two copies to the host and a synchronisation) per
        # graph_replays_max graphs, a short run wastes few empty windows after its end, and the
        # host regains control within about a second however long the windows are
        replays = 1
        while self._poll(status, iters, cap_total, progress, steer, clock):
            t = time.perf_counter()
            with stream:
                for _ in range(replays):
                    graph.launch() if graph is not None else iterations()
            stream.synchronize()
            if deadline_s is not None and time.perf_counter() - t_start > deadline_s:
                break
            dt = time.perf_counter() - t
            if dt < 0.1:
                replays = min(2 * replays, d.graph_replays_max)
            elif dt > 0.5:
                replays = max(1, replays // 2)
        return window_blocks

    def batch_memory_limit(self) -> int:
        """Bytes one batch may take: a fraction of the device memory free now (after returning
        CuPy's cached blocks)."""
        from mvopt.engine.sizing import GPU_MEMORY_FRACTION
        with self.cp.cuda.Device(self.device):
            self.cp.get_default_memory_pool().free_all_blocks()
            free, _ = self.cp.cuda.runtime.memGetInfo()
        return int(free * GPU_MEMORY_FRACTION)

    def launch_parts(self, nodes: Sequence[int]) -> list[list[int]]:
        """This backend's launch parts of experiments with these node counts (:func:`launch_parts`)."""
        return launch_parts(nodes, self.launch, self.defaults)

    def _mode(self, batch: Batch) -> tuple[str, tuple[np.ndarray, int] | None]:
        """The launch mode of a batch and, for groups, its blocks (experiment_groups)."""
        d = self.defaults
        if self.launch == "graph":
            return "graph", None
        widths = batch.cols["exp_node_hi"] - batch.cols["exp_node_lo"]
        groups = experiment_groups(widths, d.group_block_threads, d.group_threads_max)
        # graph: an experiment too large for a block; auto also keeps graph for experiments
        # wider than `auto_groups_nodes_max` (docs/decisions/0001)
        if groups is None or (self.launch == "auto" and int(widths.max(initial=0)) > d.auto_groups_nodes_max):
            return "graph", None
        return "groups", groups

    def run(self, batch: Batch, *, chunk_iters: int | None = None, max_iters: int | None = None,
            deadline_s: float | None = None, progress: Callable[[int, int], None] | None = None,
            steer: Steer | None = None, resumable: bool = True) -> int:
        """Simulate the batch on the GPU; the batch's result columns receive the final state.
        Returns the most windows any experiment simulated. `max_iters` (windows per experiment)
        and `deadline_s` (wall seconds) stop early even if experiments are still running
        (profiling, benchmarks with a time budget); `last_timing` holds the upload / kernel /
        download seconds. The first launch runs at most `chunk_iters` windows per experiment
        (default: the table's chunk_windows), the next ones as many as take a fraction of a
        second. `progress(done, windows, slowest_ps, ended_ps)` is called between launches
        (progress.backend_counts); `steer(statuses)` too, and the experiments (batch indices) it returns
        that still run are cancelled (engine/race.py). A run stopped early with experiments still
        running copies back its whole state and its packets in flight (`Batch.scratch`), so that
        running the batch again, on either backend, continues it; `resumable=False` skips that
        copy (a benchmark that stops for good)."""
        cp = self.cp
        chunk_iters = chunk_iters or self.defaults.chunk_windows
        kernels = self.prepare(batch)
        with cp.cuda.Device(self.device):
            t0 = time.perf_counter()
            # a run stopped on the CPU continues from the reports its state implies
            derived = gpu_report_columns(batch.cols) if batch.gpu_reports_stale else {}
            cols = {**batch.cols, **derived}
            # all-zero columns are set on the device (a memset), not copied
            dev = {name: cp.zeros(max(a.size, 1), a.dtype) if (name in batch.zero_columns and name not in derived)
                   or not a.size else cp.asarray(a) for name, a in cols.items()}
            mode, groups = self._mode(batch)
            if mode == "groups":
                # a group's threads take its switches first, the widest first and among those of a
                # width the ones with more hosts (top-of-rack) first, then its hosts: warps of one
                # kind of node
                order = node_order(batch.cols, widest_first=True, groups=groups[0], tor_first=True)
                dev["node_order"] = cp.asarray(order.astype(batch.cols["node_order"].dtype))
            elif self._steals(int(batch.counts["n_node"]), kernels.window_resident_blocks):
                # warps take the widest nodes (the busiest threads) first, the hosts last
                order = node_order(batch.cols, widest_first=True).astype(batch.cols["node_order"].dtype)
                dev["node_order"] = cp.asarray(order)
            if batch.scratch is not None:             # a stopped run's packets in flight
                dev.update({name: cp.asarray(a) for name, a in batch.scratch.items()})
            else:
                dev.update(scratch_arrays(batch, cp))  # built on the device, never copied
            # ring packets are read and written as two 16-byte vectors (kernels/mv_common.cuh)
            if dev["pkt"].data.ptr % 32:
                raise AssertionError(f"packet slots at {dev['pkt'].data.ptr:#x}: not 32-byte aligned")
            ctx = build_ctx(batch.counts, {name: a.data.ptr for name, a in dev.items()})
            kernels.ctx_symbol.copy_from_host(ctypes.addressof(ctx), ctypes.sizeof(ctx))
            status, iters = dev["exp_status"], dev["exp_iter"]
            start = first_window(batch.cols["exp_status"], batch.cols["exp_iter"])
            cap_total = start + max_iters if max_iters is not None else 1 << 62
            cp.cuda.Device().synchronize()
            t1 = time.perf_counter()
            if mode == "graph":
                blocks = self._run_graph(kernels, batch, status, iters, cap_total, chunk_iters, deadline_s, t1,
                                         progress, steer, dev["exp_T_ps"])
                block_threads = self.threads
            else:
                offsets, block_threads = groups
                launch, blocks = self._groups_launcher(kernels.groups, offsets, block_threads, status, iters)
                self._run_launches(launch, status, iters, start, cap_total, chunk_iters, deadline_s, t1, progress,
                                   steer, dev["exp_T_ps"])
            total = int(iters.get().max()) - start
            t2 = time.perf_counter()
            # on the host: a CuPy comparison would compile an element-wise kernel at its first use
            stopped = resumable and bool((status.get() == ST_RUN).any())
            copied = STATE_COLUMNS if stopped else RESULT_COLUMNS
            for name in copied:
                if batch.cols[name].size:
                    dev[name].get(out=batch.cols[name])     # into the host column: no second copy
            # what came back is no longer what was built: a later upload must copy it, not zero it
            batch.zero_columns = batch.zero_columns - frozenset(copied)
            batch.gpu_reports_stale = False
            batch.scratch = {name: dev[name].get() for name in scratch_words(batch.counts)} if stopped else None
            del dev, status, iters
            # back to the driver, not only to CuPy's pool: other processes (the other GPU workers,
            # another study's worker) may need it before this one runs again
            cp.get_default_memory_pool().free_all_blocks()
            self.last_timing = {"upload_s": t1 - t0, "kernel_s": t2 - t1, "download_s": time.perf_counter() - t2,
                                "blocks": blocks, "threads_per_block": block_threads, "launch": mode}
            return total
