"""The backends' defaults, in one table: how each backend runs a batch when nothing else is asked.

Nothing here changes a result: an experiment's result is the same under any of these values
(tests/engine check it), so they are tuning, not model parameters. A backend takes its row of the
table (`CPU`, `GPU`); a test or a measurement passes a changed copy
(`dataclasses.replace(GPU, group_block_threads=32)`), which is checked when the backend is made.

The kernels' compile-time constants that a backend may set are here too (`KERNEL_DEFINES`): the
pull-vs-lock ablation (MV_PUSH_LOCK), the two switch widths at which a switch's event loop
changes its data structure (MV_TREE_PORTS, MV_CACHE_PORTS), which tests shrink so that small
topologies reach the wide switches' code, and how many arrivals a switch window needs to run port
by port (MV_LANES_PORTS_PER_ARRIVAL), which tests raise so that small scenarios reach the lanes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["CPU", "GPU", "CpuDefaults", "GpuDefaults", "KERNEL_DEFINES", "LAUNCH_MODES", "check_defines"]

# How the GPU runs the two phases of a window (kernels/mv_cuda_main.cuh): 'groups' (the
# megakernel: each experiment's nodes in one block, the block's barrier between the phases, many
# windows per launch), 'graph' (one launch per phase, many windows replayed as a CUDA graph), or
# 'auto': a batch's experiments of at most GpuDefaults.auto_groups_nodes_max nodes as groups, the
# others as graph, in sub-batches of their own (engine/split.py), so that no experiment waits for
# another's windows.
LAUNCH_MODES = ("auto", "groups", "graph")


def _check_positive(row: object, what: str) -> None:
    for f in fields(row):
        value = getattr(row, f.name)
        if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{what}.{f.name} = {value!r}: expected a positive integer")


@dataclass(frozen=True)
class CpuDefaults:
    """The CPU backend's row."""

    nodes_per_thread: int = 512       # a single experiment: a thread per this many nodes (OpenMP's barriers
                                      # cost more than they save below it)
    chunk_windows: int = 1 << 20      # windows per call into the kernels
    progress_windows: int = 16384     # ... with a progress callback: between two reports
    steer_windows: int = 512          # ... with a race's steer: a cancelled experiment stops within ~0.1-1 s

    def __post_init__(self) -> None:
        _check_positive(self, "CpuDefaults")


@dataclass(frozen=True)
class GpuDefaults:
    """The GPU backend's row."""

    launch: str = "auto"              # LAUNCH_MODES; $MVOPT_GPU_LAUNCH overrides it (the ablation)
    threads: int = 128                # the graph kernels' block (MV_THREADS)
    auto_groups_nodes_max: int = 128  # auto: experiments of at most this many nodes run as groups, the rest as graph
    group_threads_max: int = 512      # the groups kernel's largest block, and so experiment (MV_GROUP_THREADS)
    group_block_threads: int = 256    # groups: consecutive experiments packed into blocks of this many threads
    group_slice_windows: int = 16     # groups beyond the resident grid take turns, this many windows each
    launch_budget_ns: int = 300_000_000   # a groups launch stops taking windows after this long
    chunk_windows: int = 256          # the first launch's windows per experiment (then adapted)
    graph_windows: int = 64           # graph: windows captured in one CUDA graph
    graph_replays_max: int = 4        # graph: at most this many graphs between two polls of the host
    steal_blocks_per_sm: int = 3      # graph with row stealing: the resident grid's blocks per SM (fewer
                                      # than fit, so that more of the nodes' state stays in the L2)

    def __post_init__(self) -> None:
        _check_positive(self, "GpuDefaults")
        if self.launch not in LAUNCH_MODES:
            raise ValueError(f"GpuDefaults.launch (or $MVOPT_GPU_LAUNCH) = {self.launch!r}: expected one of "
                             f"{', '.join(LAUNCH_MODES)}")
        if self.group_block_threads % 32 or self.group_block_threads > 1024:
            raise ValueError(f"GpuDefaults.group_block_threads = {self.group_block_threads}: expected a multiple "
                             "of 32 up to 1024 (threads of a block, in whole warps)")
        for name in ("threads", "group_threads_max", "auto_groups_nodes_max"):
            if getattr(self, name) > 1024:
                raise ValueError(f"GpuDefaults.{name} = {getattr(self, name)}: expected at most 1024 (threads of a block)")


CPU = CpuDefaults()
GPU = GpuDefaults()

# The kernels' compile-time constants a backend may be given (`defines`), with the values allowed.
KERNEL_DEFINES: dict[str, tuple[range, str]] = {
    "MV_PUSH_LOCK": (range(0, 3), "the pull-vs-lock ablation: 0 pull (the model), 1 a lock per receiver, "
                                  "2 one lock per experiment (docs/engine.md, 'Ablations')"),
    "MV_TREE_PORTS": (range(1, 257), "switches with more ports find their next event with tournament trees "
                                     "(default 8)"),
    "MV_CACHE_PORTS": (range(1, 1025), "switches with more ports rescan their ports at every event (default 256)"),
    "MV_LANES_PORTS_PER_ARRIVAL": (range(1, 1025), "a switch window runs port by port only with at least one "
                                                    "arrival per this many ports, else serially (default 4; tests "
                                                    "set 1024 so that small scenarios reach the lanes)"),
}


def check_defines(defines: dict[str, int] | None) -> dict[str, int]:
    """`defines` as ints, or ValueError naming the first one that is not in KERNEL_DEFINES or out of its range."""
    out: dict[str, int] = {}
    for name, value in (defines or {}).items():
        if name not in KERNEL_DEFINES:
            raise ValueError(f"kernel define {name}: not one a backend takes; expected one of "
                             f"{', '.join(KERNEL_DEFINES)}")
        allowed, what = KERNEL_DEFINES[name]
        if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
            raise ValueError(f"kernel define {name}={value!r}: expected an integer from {allowed.start} to "
                             f"{allowed.stop - 1} ({what})")
        out[name] = value
    return out
