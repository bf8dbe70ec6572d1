"""GPU backend: the same kernel sources compiled by NVRTC through CuPy, run as a megakernel.

The batch tables are uploaded once (the packet slots are allocated on the device, never
copied; all-zero columns are set there), the column addresses go to constant memory, many
windows of every experiment run per host round trip (by default the two phases of a window as
two kernels, 64 windows replayed as one CUDA graph; see LAUNCH_MODES and
kernels/mv_cuda_main.cuh), the host only checks whether experiments are still running, and the
result columns come back once at the end. Compiled with ``--fmad=false`` so that results are
bit-identical to the CPU backend.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from typing import Callable

import numpy as np

from mvopt.engine._cpu import build_ctx
from mvopt.engine.batch import (RESULT_COLUMNS, ST_CANCELLED, ST_RUN, STATE_COLUMNS, Batch, Steer, gpu_report_columns,
                                 node_order, node_order_setting, scratch_arrays, scratch_words)
from mvopt.engine.source import kernel_source
from mvopt.errors import BackendUnavailable

__all__ = ["GpuBackend", "gpu_available", "gpu_count"]

THREADS = 128    # threads per block (MV_THREADS; a variant may override it through `defines`)


def _blocks(rows: int, threads: int = THREADS) -> int:
    """Blocks of `threads` threads that cover `rows` rows (at least one)."""
    return max(1, -(-int(rows) // threads))


# How the step's phases are separated (kernels/mv_cuda_main.cuh): one launch per phase, many
# windows replayed as a CUDA graph (graph); grid-wide barriers inside one cooperative launch (coop);
# per-experiment windows inside one launch, no grid-wide barrier (async); each experiment's nodes
# in one block, the block's barrier between the phases (groups: experiments of at most
# GROUP_THREADS_MAX nodes; a batch with a larger one runs as graph). auto, the default: groups
# where every experiment fits a block of THREADS (128) nodes, else graph (docs/performance.md,
# "Launch modes", H200 at acd1d75: an idle window of 1,000 experiments 6.0 against 12.2 us,
# workload (a), 36 nodes, 8 MiB: 1.065 against 1.031 G packet-hops/s at 4,096 experiments, 0.862
# against 0.846 at 1,024; wider experiments, whose blocks wait for their widest switch, run
# under groups when asked, but have not been measured side by side with graph yet).
LAUNCH_MODES = ("auto", "graph", "coop", "async", "groups")
GROUP_THREADS_MAX = 512          # MV_GROUP_THREADS: the groups kernel's largest block
GROUP_SLICE_WINDOWS = 16         # groups beyond the resident grid take turns, this many windows each
# The groups mode packs consecutive experiments into blocks of this many threads (MV_GROUP_BLOCK
# in `defines` for a variant). Measured on an H200 (docs/performance.md, workload (a), 36 nodes):
# 256 (seven experiments a block, two blocks per SM: 14 per SM, the most the kernel's 128
# registers allow) against 224 (six, two): 1.617 against 1.577 G packet-hops/s at 64 MiB x 4,096
# (bench, sixteenth session), and at 8 MiB x 4,096 side by side 1.576 / 1.562 / 1.590 against
# 1.548 / 1.545 / 1.566 in three sessions; the idle window ~1 us dearer (9.6 against 8.8 us, one
# run). Before the link classes (thirteenth session) 224 was the faster: 1.360 against 1.340,
# and against 160 / 128 / 480 (1.311 / 1.284 / 1.332): the top-of-rack switches, first in a
# group, fill whole warps in large blocks.
GROUP_BLOCK_THREADS = 256
ASYNC_LAUNCH_NS = 300_000_000   # an async launch stops taking windows after this long (then the host checks)
L2_FETCH_LIMIT_ID = 5            # cudaLimitMaxL2FetchGranularity (CuPy has no name for it)
GRAPH_REPLAYS_MAX = 4           # graph mode: at most this many graphs (of 64 windows) between two host polls
# Row stealing's resident grid: this many blocks per SM, fewer than fit (4 at 128 registers), so
# that fewer nodes' state is in flight at once and more of it stays in the L2 between their
# events. Workload (a), 8 MiB, side by side at 74e0054: 2,048 experiments 0.876 -> 0.907 G
# packet-hops/s, 4,096 0.862 -> 0.916 (2 per SM: 0.778 / 0.909; 1: 0.806 at 4,096).
STEAL_BLOCKS_PER_SM = 3


# The GPU's switch windows: serial on the switch's thread (0), or port by port on the groups
# kernel's free threads (2, the switch lanes, the default: docs/engine.md "Switch lanes"; the
# other launch modes keep the serial loop). Measured on an H200 (docs/performance.md, eighteenth
# session): workload (a) 64 MiB x 4,096, 1.686 / 1.685 against 1.607 / 1.606 G packet-hops/s,
# idle window 9.5 against 8.0 us of kernel time. $MVOPT_SWITCH_LANES picks one for a whole
# pipeline (switch_lanes_setting).
SWITCH_LANES = 2
SWITCH_LANES_CHOICES = (0, 2)


def switch_lanes_setting() -> int:
    """$MVOPT_SWITCH_LANES: the GPU kernels' switch windows, 0 (serial) or 2 (port by port on
    the groups kernel's free threads); default SWITCH_LANES. A variant's MV_SWITCH_LANES in
    `defines` overrides it. Results do not depend on it."""
    value = os.environ.get("MVOPT_SWITCH_LANES", "")
    if not value:
        return SWITCH_LANES
    if value not in {str(x) for x in SWITCH_LANES_CHOICES}:
        raise BackendUnavailable(f"MVOPT_SWITCH_LANES={value!r}: expected one of "
                                 f"{', '.join(map(str, SWITCH_LANES_CHOICES))} (0: a switch's window on its "
                                 "thread; 2: port by port on the groups kernel's free threads)")
    return int(value)


def group_block_setting() -> int:
    """$MVOPT_GROUP_BLOCK: the groups launch mode's threads per block (default
    GROUP_BLOCK_THREADS), for benchmarks of the whole pipeline at other sizes (a variant's
    MV_GROUP_BLOCK in `defines` overrides it). Results do not depend on it."""
    value = os.environ.get("MVOPT_GROUP_BLOCK", "")
    if not value:
        return GROUP_BLOCK_THREADS
    if not value.isdigit() or not 32 <= int(value) <= GROUP_THREADS_MAX or int(value) % 32:
        raise BackendUnavailable(f"MVOPT_GROUP_BLOCK={value!r}: expected a multiple of 32 from 32 to "
                                 f"{GROUP_THREADS_MAX} (threads per block of the groups launch mode)")
    return int(value)


def experiment_groups(nodes: np.ndarray, threads: int = GROUP_BLOCK_THREADS,
                      limit: int = GROUP_THREADS_MAX) -> tuple[np.ndarray, int] | None:
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
                 steal: bool | None = None, l2_fetch_bytes: int | None = None, time_phases: bool = False,
                 window_blocks: int | None = None, group_slice_windows: int | None = None,
                 group_order: bool = True) -> None:
        """`defines`: compile-time overrides of the kernels' tuning macros (MV_MIN_BLOCKS,
        MV_CACHE_PORTS, MV_THREADS, MV_DIRECT, MV_SILENT_HOST, MV_DENSE_ROUTES, ...: docs/engine.md), for measuring
        variants; results do not depend on them.
        `launch`: how the phases of a window are separated: 'auto' (the default: 'groups' where
        every experiment has at most MV_THREADS nodes, else 'graph'), 'graph' (one launch per
        phase, many windows replayed as a CUDA graph), 'coop' (one cooperative launch, grid-wide
        barriers), 'async' (one launch, each experiment moves to its next window when its own
        nodes finished the last one) or 'groups' (one launch, each experiment's nodes in one block,
        whose barrier separates the phases; a batch with an experiment of more than
        GROUP_THREADS_MAX nodes runs as 'graph'); default from $MVOPT_GPU_LAUNCH (and the groups
        mode's threads per block from $MVOPT_GROUP_BLOCK: group_block_setting). `steal`: whether the graph
        mode's window kernel runs on a resident grid whose warps take rows from a counter
        (default: when the batch's nodes need more than one wave of blocks; then the nodes also
        go widest first, unless $MVOPT_NODE_ORDER says otherwise). `l2_fetch_bytes`: the device's
        maximum L2 fetch granularity during a run (a hint to the driver, 0-128; default: left as
        it is, or $MVOPT_L2_FETCH_BYTES), restored afterwards (measured on an H200: 32 bytes was
        slower than the device's 64, docs/performance.md). `time_phases` (graph mode, a
        diagnosis): launch each kernel directly between two CUDA events instead of replaying
        graphs, and report the window and advance kernels' GPU seconds in last_timing["phase_s"]. `window_blocks` (with row stealing): the resident
        grid's blocks (default: STEAL_BLOCKS_PER_SM per SM, fewer than fit, so that fewer nodes'
        state is in flight at once and more of it stays in the L2 between events).
        `group_slice_windows` (groups mode): the windows of a slice when groups take turns
        (default GROUP_SLICE_WINDOWS); `group_order` (groups mode, the default): a group's
        threads take its switches first, the widest first and among those of a width the ones
        with more hosts (top-of-rack) first, then its hosts (warps of one kind of node;
        node_order(groups=..., tor_first=True)), instead of the nodes in their order (measured
        on an H200, docs/performance.md, workload (a) 8 MiB x 4,096: switches first 1.100
        against 1.043 G packet-hops/s; top-of-rack first 1.140 against 1.117). Results depend
        on none of these."""
        self.group_order = group_order
        self.group_slice_windows = group_slice_windows
        self.launch = launch or os.environ.get("MVOPT_GPU_LAUNCH", LAUNCH_MODES[0])
        group_block = group_block_setting()
        lanes = switch_lanes_setting()
        self.graph_used = False        # graph mode: whether this CuPy captured a CUDA graph
        self.time_phases = time_phases
        if window_blocks is not None and window_blocks < 1:
            raise ValueError(f"window_blocks must be >= 1, got {window_blocks}")
        self.window_blocks = window_blocks
        self.phase_s: dict[str, float] | None = None
        env_fetch = os.environ.get("MVOPT_L2_FETCH_BYTES", "")
        self.l2_fetch_bytes = l2_fetch_bytes if l2_fetch_bytes is not None else (int(env_fetch) if env_fetch else None)
        if self.launch not in LAUNCH_MODES:
            raise BackendUnavailable(f"GPU launch mode (MVOPT_GPU_LAUNCH) must be one of "
                                     f"{', '.join(LAUNCH_MODES)}, got {self.launch!r}")
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
            defines = dict(defines or {})
            if "MV_SWITCH_LANES" not in defines and lanes:
                defines["MV_SWITCH_LANES"] = lanes
            self.lanes = int(defines.get("MV_SWITCH_LANES", 0))   # (2: groups blocks of whole warps)
            self.threads = int(defines.pop("MV_THREADS", THREADS))
            self.group_threads = int(defines.pop("MV_GROUP_THREADS", GROUP_THREADS_MAX))   # the groups kernel's bound
            self.group_block = int(defines.pop("MV_GROUP_BLOCK", group_block))
            self.steal = steal
            options = ("--fmad=false", "-std=c++17", f"-DMV_THREADS={self.threads}",
                       f"-DMV_GROUP_THREADS={self.group_threads}")
            options += tuple(f"-D{k}={int(v)}" for k, v in sorted(defines.items()))
            if os.environ.get("MVOPT_LINEINFO") == "1":     # source lines for profilers (ncu)
                options += ("-lineinfo",)
            self.module = cupy.RawModule(code=kernel_source("cuda"), options=options,
                                         enable_cooperative_groups=True)
            # all kernels of this module launch cooperatively, so every block is resident at once
            # (mv_run_async needs that too: a node may wait for a node of another block)
            self.coop_kernel = self.module.get_function("mv_run_coop")
            self.async_kernel = self.module.get_function("mv_run_async")
            self.ctx_symbol = self.module.get_global("mv_ctx")     # struct Ctx in constant memory
            # the per-phase kernels, from a module launched the ordinary way (full grids)
            self.phase_module = cupy.RawModule(code=kernel_source("cuda"), options=options)
            self.phases = {p: self.phase_module.get_function(f"mv_phase_{p}")
                           for p in ("window", "advance")}
            self.groups_kernel = self.phase_module.get_function("mv_run_groups")
            self.phase_ctx_symbol = self.phase_module.get_global("mv_ctx")
            self.ctx_symbols = [self.ctx_symbol, self.phase_ctx_symbol]   # every module's context
            self.options = options
            props = cupy.cuda.runtime.getDeviceProperties(device)
            self.sms = int(props["multiProcessorCount"])
            self.max_blocks = {}      # blocks resident at once, per one-launch kernel
            for mode, kernel in (("coop", self.coop_kernel), ("async", self.async_kernel)):
                try:
                    per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr,
                                                                                        self.threads, 0)
                except Exception:
                    per_sm = 1
                self.max_blocks[mode] = max(1, self.sms * int(per_sm))
            per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.phases["window"].kernel.ptr,
                                                                                self.threads, 0)
            self.window_resident_blocks = max(1, self.sms * int(per_sm))

    @staticmethod
    def _poll(status, iters, cap: int, progress: Callable[[int, int], None] | None,
              steer: Steer | None = None) -> bool:
        """Whether an experiment still runs and has windows left below `cap`, after telling
        `progress` (experiments ended, furthest window) and letting `steer` cancel experiments
        (engine/race.py). On the host (here and in _run_launches): CuPy's element-wise
        operations would be compiled at their first use in a process (measured: 5.9 s of the
        first run on a fresh machine)."""
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
            progress(int((st != 0).sum()), int(it.max()))
        return bool(((st == 0) & (it < cap)).any())

    def _wait(self) -> None:
        """Wait for the current stream, polling, so that other threads of this process keep the GIL."""
        done = self.cp.cuda.Event(block=False)
        done.record()
        while not done.done:
            time.sleep(0.0005)

    def _run_launches(self, mode: str, launch_to, status, iters, start: int, cap_total: int, chunk_iters: int,
                      deadline_s: float | None, t_start: float, progress: Callable[[int, int], None] | None,
                      steer: Steer | None = None) -> None:
        """The one-launch modes, launch after launch until no experiment runs any more or the
        budget is spent. `launch_to(cap)` runs experiments up to window `cap`: coop raises it by
        `chunk` per launch, adapted so that a launch takes a fraction of a second (the host
        regains control, and an interrupted process releases the GPU, within about a second);
        async launches stop on a time budget of their own (groups on both). A launch that moved no experiment
        forward is a bug in the kernels: an error, never a hang."""
        cap, chunk = start, max(1, chunk_iters)
        windows = iters.get()
        while self._poll(status, iters, cap_total, progress, steer):
            cap = min(cap_total, cap + chunk) if mode in ("coop", "groups") else cap_total
            t = time.perf_counter()
            launch_to(cap)
            self._wait()
            dt = time.perf_counter() - t
            before, windows = windows, iters.get()
            if (windows == before).all():
                raise RuntimeError(f"GPU {mode} launch made no progress (a bug in the kernels)")
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

    def _groups_launcher(self, offsets: np.ndarray, threads: int, status,
                         iters) -> tuple[Callable[[int], None], int]:
        """`launch(cap)` for the groups kernel (kernels/mv_cuda_main.cuh: a resident grid taking
        slices of groups from a queue), and its blocks. One slice per group when the groups fit
        the grid, else slices of GROUP_SLICE_WINDOWS windows, enough for every running
        experiment to reach `cap` (`status`, `iters`: the device's columns)."""
        cp = self.cp
        n_groups = len(offsets) - 1
        kernel = self.groups_kernel
        acc_words = 4 * int(np.diff(offsets).max())      # reports: four per experiment of the largest group
        smem = 8 * acc_words
        if self.lanes == 2:   # the switch lanes take their tasks by whole warps (mv_cuda_main.cuh)
            threads = -(-threads // 32) * 32
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
                slice_windows = self.group_slice_windows or GROUP_SLICE_WINDOWS
                slices = n_groups * max(1, -(-(cap - lowest) // slice_windows))
            stream = cp.cuda.get_current_stream().ptr
            cp.cuda.runtime.memsetAsync(queue.data.ptr, 0, queue.nbytes, stream)
            cp.cuda.runtime.memsetAsync(done.data.ptr, 0, done.nbytes, stream)
            kernel((blocks,), (threads,), (np.int64(cap), group_exp, np.int64(n_groups), np.int64(slice_windows),
                                           np.int64(slices), queue, done, np.int64(ASYNC_LAUNCH_NS),
                                           np.int64(acc_words), np.int32(self.group_order)),
                   shared_mem=smem)
        return launch, blocks

    def _steals(self, n_node: int) -> bool:
        """Whether the graph mode's window kernel takes rows from a counter on a resident grid:
        by default when one wave of blocks does not cover the batch's nodes (measured on (a) at
        4,096 experiments, 2.2 waves: 0.723 vs 0.707 G packet-hops/s, 0.756 with the widest nodes
        first; a batch of one wave, e.g. idle windows, gains nothing: 15.7 vs 14.4 us per window)."""
        if self.steal is not None:
            return self.steal
        return n_node > self.window_resident_blocks * self.threads

    def _run_graph(self, batch: Batch, status, iters, cap_total: int, chunk_iters: int,
                   deadline_s: float | None, t_start: float, progress: Callable[[int, int], None] | None,
                   steer: Steer | None = None) -> int:
        """Per-phase launches: `per_graph` iterations captured once as a CUDA graph and replayed
        until every experiment ended (iterations past an experiment's end do nothing to it).
        Returns the window kernel's blocks."""
        cp = self.cp
        cap = np.int64(cap_total)
        n_node, n_exp = int(batch.counts["n_node"]), int(batch.counts["n_exp"])
        # the window kernel's row counter (steal), reset by every advance
        next_row = cp.zeros(1, dtype=np.uint64)
        steal = self._steals(n_node)
        window_blocks = _blocks(n_node, self.threads)
        if steal:
            window_blocks = min(window_blocks, self.window_blocks or self.sms * STEAL_BLOCKS_PER_SM,
                                self.window_resident_blocks)
        launches = [("window", self.phases["window"], window_blocks, (cap, next_row, np.int32(steal))),
                    ("advance", self.phases["advance"], _blocks(n_exp, self.threads), (cap, next_row))]
        per_graph = max(1, min(64, chunk_iters))
        stream = cp.cuda.Stream(non_blocking=True)

        # time_phases (a diagnosis): direct launches, each between two events, so that the
        # window and advance kernels' GPU times come apart (last_timing["phase_s"])
        timed: list[tuple[str, object, object]] = []
        phase_s = {"window": 0.0, "advance": 0.0}

        def iterations() -> None:      # on the current stream
            for _ in range(per_graph):
                for name, kernel, grid, args in launches:
                    if self.time_phases:
                        start, end = cp.cuda.Event(), cp.cuda.Event()
                        start.record()
                        kernel((grid,), (self.threads,), args)
                        end.record()
                        timed.append((name, start, end))
                    else:
                        kernel((grid,), (self.threads,), args)

        graph = None
        with stream:
            try:
                if not self.time_phases:
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
        # GRAPH_REPLAYS_MAX graphs, a short run wastes few empty windows after its end, and the
        # host regains control within about a second however long the windows are
        replays = 1
        while self._poll(status, iters, cap_total, progress, steer):
            t = time.perf_counter()
            with stream:
                for _ in range(replays):
                    graph.launch() if graph is not None else iterations()
            stream.synchronize()
            for name, start, end in timed:
                phase_s[name] += cp.cuda.get_elapsed_time(start, end) / 1e3
            timed.clear()
            if deadline_s is not None and time.perf_counter() - t_start > deadline_s:
                break
            dt = time.perf_counter() - t
            if dt < 0.1:
                replays = min(2 * replays, GRAPH_REPLAYS_MAX)
            elif dt > 0.5:
                replays = max(1, replays // 2)
        self.phase_s = phase_s if self.time_phases else None
        return window_blocks

    def _set_l2_fetch(self, value: int | None) -> int | None:
        """Set the device's maximum L2 fetch granularity (None: leave it); returns the previous one."""
        if value is None:
            return None
        rt = self.cp.cuda.runtime
        before = int(rt.deviceGetLimit(L2_FETCH_LIMIT_ID))
        rt.deviceSetLimit(L2_FETCH_LIMIT_ID, int(value))
        return before

    def batch_memory_limit(self) -> int:
        """Bytes one batch may take: a fraction of the device memory free now (after returning
        CuPy's cached blocks)."""
        from mvopt.engine.sizing import GPU_MEMORY_FRACTION
        with self.cp.cuda.Device(self.device):
            self.cp.get_default_memory_pool().free_all_blocks()
            free, _ = self.cp.cuda.runtime.memGetInfo()
        return int(free * GPU_MEMORY_FRACTION)

    def run(self, batch: Batch, *, chunk_iters: int = 256, max_iters: int | None = None,
            deadline_s: float | None = None, progress: Callable[[int, int], None] | None = None,
            steer: Steer | None = None, resumable: bool = True) -> int:
        """Simulate the batch on the GPU; the batch's result columns receive the final state.
        Returns the most windows any experiment simulated. `max_iters` (windows per experiment)
        and `deadline_s` (wall seconds) stop early even if experiments are still running
        (profiling, benchmarks with a time budget); `last_timing` holds the upload / kernel /
        download seconds. The first launch runs at most `chunk_iters` windows per experiment, the
        next ones as many as take a fraction of a second. `progress(done, windows)` is called
        between launches: experiments ended, furthest window; `steer(statuses)` too, and the
        experiments (batch indices) it returns that still run are cancelled (engine/race.py).
        A run stopped early with experiments still running copies back its whole state and its
        packets in flight (`Batch.scratch`), so that running the batch again, on either backend,
        continues it; `resumable=False` skips that copy (a benchmark that stops for good)."""
        cp = self.cp
        with cp.cuda.Device(self.device):
            t0 = time.perf_counter()
            # a run stopped on the CPU continues from the reports its state implies (a run the GPU
            # stopped has its own, which may be mid-window in the async mode: kept)
            derived = gpu_report_columns(batch.cols) if batch.gpu_reports_stale else {}
            cols = {**batch.cols, **derived}
            # all-zero columns are set on the device (a memset), not copied
            dev = {name: cp.zeros(max(a.size, 1), a.dtype) if (name in batch.zero_columns and name not in derived)
                   or not a.size else cp.asarray(a) for name, a in cols.items()}
            mode, block_threads = self.launch, self.threads
            groups = None
            if mode in ("groups", "auto"):
                widths = batch.cols["exp_node_hi"] - batch.cols["exp_node_lo"]
                groups = experiment_groups(widths, self.group_block, min(GROUP_THREADS_MAX, self.group_threads))
                # graph: an experiment too large for a block; auto also keeps graph for experiments
                # wider than a block of MV_THREADS (128): groups is measured faster only up to that
                too_wide = groups is None or (mode == "auto" and int(widths.max(initial=0)) > self.threads)
                mode = "graph" if too_wide else "groups"
            if mode == "groups" and self.group_order:
                order = node_order(batch.cols, widest_first=True, groups=groups[0], tor_first=True)
                dev["node_order"] = cp.asarray(order.astype(batch.cols["node_order"].dtype))
            if mode == "graph" and self._steals(int(batch.counts["n_node"])) and node_order_setting() == "auto":
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
            for symbol in self.ctx_symbols:
                symbol.copy_from_host(ctypes.addressof(ctx), ctypes.sizeof(ctx))
            # one-launch modes: a resident grid; graph modes launch full grids (for the record)
            blocks = _blocks(max(int(batch.counts["n_node"]), int(batch.counts["n_exp"])), self.threads)
            blocks = min(self.max_blocks[mode], blocks) if mode in self.max_blocks else blocks
            status, iters = dev["exp_status"], dev["exp_iter"]
            start = first_window(batch.cols["exp_status"], batch.cols["exp_iter"])
            cap_total = start + max_iters if max_iters is not None else 1 << 62
            cp.cuda.Device().synchronize()
            self.phase_s = None
            fetch_before = self._set_l2_fetch(self.l2_fetch_bytes)
            try:
                t1 = time.perf_counter()
                if mode == "graph":     # (blocks: the window kernel's grid)
                    blocks = self._run_graph(batch, status, iters, cap_total, chunk_iters, deadline_s, t1, progress,
                                             steer)
                elif mode == "groups":
                    offsets, block_threads = groups
                    launch, blocks = self._groups_launcher(offsets, block_threads, status, iters)
                    self._run_launches(mode, launch, status, iters, start, cap_total, chunk_iters, deadline_s, t1,
                                       progress, steer)
                else:
                    if mode == "coop":
                        out = cp.zeros(2, dtype=np.int64)
                        # kernels of a module built with enable_cooperative_groups launch cooperatively
                        kernel, extra = self.coop_kernel, out
                    else:
                        kernel, extra = self.async_kernel, np.int64(ASYNC_LAUNCH_NS)
                    self._run_launches(mode, lambda cap: kernel((blocks,), (self.threads,), (np.int64(cap), extra)),
                                       status, iters, start, cap_total, chunk_iters, deadline_s, t1, progress, steer)
                total = int(iters.get().max()) - start
                t2 = time.perf_counter()
            except BaseException:
                with contextlib.suppress(Exception):      # (after a CUDA error: the original one matters)
                    self._set_l2_fetch(fetch_before)
                raise
            self._set_l2_fetch(fetch_before)
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
            if mode == "graph" and self.phase_s is not None:
                self.last_timing["phase_s"] = dict(self.phase_s)
            return total
