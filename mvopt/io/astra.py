"""ASTRA-sim / SimAI text workloads: parser and task graph.

Format (ASTRA-sim 1.0 ``inputs/workload``, SimAI/AICB output)::

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 4 all_gpus: 32 checkpoints: 0 checkpoint_initiates: 0
    2
    attention -1 1000 ALLREDUCE 4194304 1000 ALLREDUCE 4194304 1000 NONE 0 100
    mlp       -1 2000 ALLREDUCE 4194304 2000 ALLREDUCE 4194304 2000 ALLREDUCE 8388608 100

Line 1: the parallelism policy, then optional ``key: value`` pairs (SimAI also writes ``pp_comm``
without the colon); line 2: the number of layers; then one line per layer: ``name reserved
fwd_compute fwd_comm_type fwd_comm_bytes ig_compute ig_comm_type ig_comm_bytes wg_compute
wg_comm_type wg_comm_bytes update_time`` (times in ns, sizes in bytes per rank). A comm type is
NONE or a collective (ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL) with an optional group
suffix ``_EP`` or ``_DP_EP`` (SimAI's MoE groups). Blank lines and lines starting with ``#`` or
``//`` are ignored. Any other deviation, SimAI's combined ``ALLREDUCEALLTOALL`` included, is an
:class:`~mvopt.errors.InputFileError` naming the file and line.

**Groups.** ``n`` GPUs (``all_gpus``, default the cluster's), model-parallel group size ``mp``
(``model_parallel_NPU_group``): DATA: mp = 1; MODEL: mp = n; HYBRID_DATA_MODEL,
HYBRID_TRANSFORMER[_FWD_IN_BCKWD], MICRO: MP groups are ``mp`` consecutive GPUs and DP groups
take one GPU of each; HYBRID_MODEL_DATA: DP groups are ``n/mp`` consecutive GPUs and MP groups
stride. A collective without suffix runs over the MP group in the forward and input-gradient
phases and over the DP group in the weight-gradient phase; ``_EP`` runs it over the EP group and
``_DP_EP`` over the expert-data-parallel group, in any phase (as SimAI's Workload.cc maps them).
Each DP group of ``n/mp`` GPUs splits into ``n/(mp ep)`` EP groups of ``ep`` consecutive members
(the ``packed`` placement of :func:`mvopt.workload.parallel.ep_dp_groups`); the DP_EP groups
take one member of each. ``ep`` must divide ``n/mp``.

**Pipelines.** SimAI's packet-level loop builds its communicators with one pipeline stage (DP
size ``all_gpus / mp``) and issues no pipeline sends: every GPU runs every layer, and
``pp_comm`` enters only its analytical estimate of exposed pipeline time. This module does the
same: ``pp``, ``pp_comm``, ``vpp``, ``checkpoints`` and ``checkpoint_initiates`` are read and
do not change the task graph.

**Task graph** per GPU and iteration (:func:`astra_graph`): ``ga`` passes of forward (each
layer: compute, then its collective, blocking) and backward in reverse (input-gradient compute
and collective, blocking; weight-gradient compute); in the last pass each weight-gradient
collective starts after its compute and runs beside the rest of the backward, one after the
other on the DP communicator; then each layer's update (``update_time``) once its weight
gradients are reduced. Collectives use :func:`mvopt.comm.hierarchical.add_group_collective`
(NVLink model inside a server, flows on the network between servers); all-to-alls use
:func:`mvopt.comm.alltoall.add_all_to_all` with ``size / members`` bytes to each peer and the
``collective.all_to_all`` algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from mvopt.errors import InputFileError
from mvopt.files import read_text

__all__ = ["AstraLayer", "AstraWorkload", "parse_astra", "read_astra", "astra_graph", "groups", "comm_groups",
           "POLICIES", "COMM_TYPES", "GROUP_SUFFIXES", "GROUPS"]

POLICIES = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER",
            "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "MICRO")
COMM_TYPES = {"NONE": None, "ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather",
              "REDUCESCATTER": "reduce_scatter", "ALLTOALL": "all_to_all"}
# comm-type suffix -> group; no suffix: the phase's own group (mp forward/input gradient, dp weight gradient)
GROUP_SUFFIXES = {"_DP_EP": "dp_ep", "_EP": "ep"}
GROUPS = ("mp", "dp", "ep", "dp_ep")
_CATEGORY = {"mp": "tp_comm", "dp": "dp_comm", "ep": "ep_comm", "dp_ep": "dp_comm"}  # blocking collectives' task category
_KEYS = {"model_parallel_npu_group": "mp", "ep": "ep", "pp": "pp", "vpp": "vpp", "ga": "ga",
         "all_gpus": "all_gpus", "checkpoints": "checkpoints", "checkpoint_initiates": "checkpoint_initiates",
         "pp_comm": "pp_comm"}


@dataclass(frozen=True)
class AstraLayer:
    name: str
    fwd_ns: float
    fwd_comm: str | None
    fwd_bytes: int
    ig_ns: float
    ig_comm: str | None
    ig_bytes: int
    wg_ns: float
    wg_comm: str | None
    wg_bytes: int
    update_ns: float
    fwd_group: str = "mp"
    ig_group: str = "mp"
    wg_group: str = "dp"


@dataclass(frozen=True)
class AstraWorkload:
    policy: str
    options: dict = field(default_factory=dict)
    layers: tuple[AstraLayer, ...] = ()

    @property
    def mp(self) -> int:
        return int(self.options.get("mp", 1))

    @property
    def ga(self) -> int:
        return int(self.options.get("ga", 1))

    @property
    def ep(self) -> int:
        return int(self.options.get("ep", 1))


def _content(text: str):
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("//"):
            continue
        yield i, line


def parse_astra(text: str, file: str = "<string>") -> AstraWorkload:
    """Parse the text of an ASTRA-sim/SimAI workload (see the module docstring)."""
    lines = list(_content(text))
    if not lines:
        raise InputFileError(file, None, "empty workload (expected the parallelism policy on line 1)")
    ln, head = lines[0]
    tokens = head.split()
    policy = tokens[0].upper()
    if policy not in POLICIES:
        raise InputFileError(file, ln, f"unknown parallelism policy {tokens[0]!r} (expected one of "
                             f"{', '.join(POLICIES)})")
    opts: dict = {}
    rest = tokens[1:]
    i = 0
    while i < len(rest):
        key = rest[i]
        if key.lower() == "pp_comm":  # SimAI writes this one without the colon
            key += ":"
        if not key.endswith(":"):
            raise InputFileError(file, ln, f"expected 'key: value' after the policy, got {key!r}")
        name = key[:-1].lower()
        if name not in _KEYS:
            raise InputFileError(file, ln, f"unknown option {key[:-1]!r} (known: {', '.join(_KEYS)})")
        if i + 1 >= len(rest):
            raise InputFileError(file, ln, f"option {key[:-1]!r} has no value")
        try:
            val = int(rest[i + 1])
        except ValueError:
            raise InputFileError(file, ln, f"option {key[:-1]!r} must be an integer, got {rest[i + 1]!r}") from None
        if val < 0 or (val == 0 and _KEYS[name] in ("mp", "ga", "all_gpus", "pp", "ep")):
            raise InputFileError(file, ln, f"option {key[:-1]!r} must be a positive integer, got {val}")
        opts[_KEYS[name]] = val
        i += 2
    if len(lines) < 2:
        raise InputFileError(file, None, "missing the layer count (line 2)")
    ln, count = lines[1]
    try:
        n = int(count.split()[0]) if len(count.split()) == 1 else None
    except ValueError:
        n = None
    if n is None or n < 1:
        raise InputFileError(file, ln, f"expected the number of layers (an integer >= 1), got {count!r}")
    body = lines[2:]
    if len(body) != n:
        where = body[n][0] if len(body) > n else None
        raise InputFileError(file, where, f"the header announces {n} layers but the file has {len(body)}")
    layers = []
    for ln, line in body:
        f = line.split()
        if len(f) != 12:
            raise InputFileError(file, ln, f"a layer line has 12 fields (name reserved fwd_compute fwd_comm_type "
                                 f"fwd_comm_size ig_compute ig_comm_type ig_comm_size wg_compute wg_comm_type "
                                 f"wg_comm_size update_time), got {len(f)}")

        def num(k: int, what: str, integer: bool = False):
            try:
                x = int(f[k]) if integer else float(f[k])
            except ValueError:
                raise InputFileError(file, ln, f"{what} must be a number, got {f[k]!r}") from None
            if x < 0:
                raise InputFileError(file, ln, f"{what} must be >= 0, got {f[k]}")
            return x

        def comm(k: int, what: str, default_group: str) -> tuple[str | None, str]:
            t = f[k].upper()
            base, group = t, default_group
            for suffix, g in GROUP_SUFFIXES.items():
                if t.endswith(suffix) and t != "NONE":
                    base, group = t[:-len(suffix)], g
                    break
            if base == "ALLREDUCEALLTOALL":
                raise InputFileError(file, ln, f"{what} {f[k]!r} (SimAI's combined all-reduce + all-to-all) is not "
                                     "supported; write the two collectives on separate layers")
            if base not in COMM_TYPES or (base == "NONE" and t != "NONE"):
                raise InputFileError(file, ln, f"{what} must be one of {', '.join(COMM_TYPES)}, the collectives "
                                     f"optionally suffixed {' or '.join(sorted(GROUP_SUFFIXES))}; got {f[k]!r}")
            return COMM_TYPES[base], group

        try:
            int(f[1])
        except ValueError:
            raise InputFileError(file, ln, f"the reserved field (2nd) must be an integer such as -1, got {f[1]!r}") from None
        fwd_comm, fwd_group = comm(3, "fwd_comm_type", "mp")
        ig_comm, ig_group = comm(6, "ig_comm_type", "mp")
        wg_comm, wg_group = comm(9, "wg_comm_type", "dp")
        layers.append(AstraLayer(
            name=f[0], fwd_ns=num(2, "fwd_compute"), fwd_comm=fwd_comm, fwd_bytes=num(4, "fwd_comm_size", True),
            ig_ns=num(5, "ig_compute"), ig_comm=ig_comm, ig_bytes=num(7, "ig_comm_size", True),
            wg_ns=num(8, "wg_compute"), wg_comm=wg_comm, wg_bytes=num(10, "wg_comm_size", True),
            update_ns=num(11, "update_time"), fwd_group=fwd_group, ig_group=ig_group, wg_group=wg_group))
    return AstraWorkload(policy=policy, options=opts, layers=tuple(layers))


def read_astra(path: str | Path) -> AstraWorkload:
    """Read and parse a workload file."""
    return parse_astra(read_text(path), str(path))


def groups(w: AstraWorkload, n: int, file: str = "<workload>") -> tuple[list[list[int]], list[list[int]]]:
    """(MP groups, DP groups) over GPUs ``0..n-1`` for the workload's policy."""
    if w.policy == "DATA":
        mp = 1
    elif w.policy == "MODEL":
        mp = n
    else:
        mp = w.mp
    if n % mp:
        raise InputFileError(file, 1, f"model_parallel_NPU_group ({mp}) must divide the GPU count ({n})")
    dp = n // mp
    if w.policy == "HYBRID_MODEL_DATA":
        dpg = [list(range(i * dp, (i + 1) * dp)) for i in range(mp)]
        mpg = [list(range(j, n, dp)) for j in range(dp)]
    else:
        mpg = [list(range(i * mp, (i + 1) * mp)) for i in range(dp)]
        dpg = [list(range(j, n, mp)) for j in range(mp)]
    return mpg, dpg


def comm_groups(w: AstraWorkload, n: int, file: str = "<workload>") -> dict[str, list[list[int]]]:
    """Every group of GPUs ``0..n-1`` by name (:data:`GROUPS`): MP and DP as :func:`groups`, EP
    groups of ``ep`` consecutive members of each DP group and DP_EP groups striding them."""
    mpg, dpg = groups(w, n, file)
    dp, ep = len(dpg[0]), w.ep
    if dp % ep:
        raise InputFileError(file, 1, f"ep ({ep}) must divide the data-parallel size all_gpus / "
                             f"model_parallel_NPU_group ({dp})")
    # the packed layout of mvopt.workload.parallel.ep_dp_groups (Megatron's order), which io may not import
    epg = [d[k:k + ep] for d in dpg for k in range(0, dp, ep)]
    dp_epg = [d[e::ep] for d in dpg for e in range(ep)]
    return {"mp": mpg, "dp": dpg, "ep": epg, "dp_ep": dp_epg}


def astra_graph(builder, w: AstraWorkload, *, gpu_host: Sequence[int], gpus_per_server: int,
                intra: Callable[[str, float, int], float], iterations: int = 1, collective=None,
                nic_bytes_per_s: float = 12.5e9, step_latency_s: float = 5e-6, chunk_gap_ps: int = 0,
                wire_factor: float | None = None, file: str = "<workload>") -> dict:
    """Append the workload's iterations to ``builder`` (hosts = NICs); returns per-GPU stream
    end task ids and counts. ``collective`` is a CollectiveConfig (algorithm, channels, ...)."""
    from mvopt.io.groupcomm import GroupCollectives

    n_cluster = len(gpu_host)
    n = int(w.options.get("all_gpus", n_cluster))
    if n > n_cluster:
        raise InputFileError(file, 1, f"all_gpus: {n} exceeds the cluster's {n_cluster} GPUs")
    grps_by_name = comm_groups(w, n, file)
    host = [int(gpu_host[g]) for g in range(n)]
    server = [g // gpus_per_server for g in range(n)]
    coll = GroupCollectives(builder, host=host, server=server, intra=intra, collective=collective,
                            nic_bytes_per_s=nic_bytes_per_s, step_latency_s=step_latency_s,
                            chunk_gap_ps=chunk_gap_ps, wire_factor=wire_factor)

    def ps(ns: float) -> int:
        return int(round(ns * 1000))

    prev = {g: [] for g in range(n)}       # last stream task per GPU
    comm_prev = {g: [] for g in range(n)}  # last DP-communicator task per GPU

    def compute(g: int, ns: float, cat: str = "compute") -> None:
        prev[g] = [builder.delay(host[g], ps(ns), after=prev[g], category=cat)]

    def collective_over(op: str, grp: list[int], nbytes: int, after: dict, cat: str) -> dict[int, list[int]]:
        return coll.run(op, grp, nbytes, after, cat)

    def blocking(op: str | None, nbytes: int, group: str, cat: str) -> None:
        if op is None or nbytes <= 0:
            return
        for grp in grps_by_name[group]:
            if len(grp) < 2:
                continue
            done = collective_over(op, grp, nbytes, {i: prev[g] for i, g in enumerate(grp)}, cat)
            for i, g in enumerate(grp):
                ids = done[i]
                prev[g] = [builder.delay(host[g], 0, after=ids, category=cat)] if len(ids) != 1 else ids

    layers = w.layers
    n_tasks0 = len(builder)
    for _ in range(iterations):
        wg_done: dict[int, dict[int, list[int]]] = {}
        for pas in range(w.ga):
            last = pas == w.ga - 1
            for layer in layers:
                for g in range(n):
                    compute(g, layer.fwd_ns)
                blocking(layer.fwd_comm, layer.fwd_bytes, layer.fwd_group, _CATEGORY[layer.fwd_group])
            for li in reversed(range(len(layers))):
                layer = layers[li]
                for g in range(n):
                    compute(g, layer.ig_ns)
                blocking(layer.ig_comm, layer.ig_bytes, layer.ig_group, _CATEGORY[layer.ig_group])
                for g in range(n):
                    compute(g, layer.wg_ns)
                if last and layer.wg_comm is not None and layer.wg_bytes > 0:
                    wg_done[li] = {}
                    for grp in grps_by_name[layer.wg_group]:
                        if len(grp) < 2:
                            continue
                        after = {i: prev[g] + comm_prev[g] for i, g in enumerate(grp)}
                        done = collective_over(layer.wg_comm, grp, layer.wg_bytes, after, "dp_comm")
                        for i, g in enumerate(grp):
                            ids = done[i]
                            j = builder.delay(host[g], 0, after=ids, category="dp_comm") if len(ids) != 1 else ids[0]
                            comm_prev[g] = [j]
                            wg_done[li][g] = [j]
        for li in reversed(range(len(layers))):
            for g in range(n):
                prev[g] = [builder.delay(host[g], ps(layers[li].update_ns),
                                         after=prev[g] + wg_done.get(li, {}).get(g, []), category="compute")]
    return {"gpus": n, "tasks": len(builder) - n_tasks0, "end": {g: prev[g][0] for g in range(n) if prev[g]}}
