"""Megatron parallel layout: feasibility against a model and a cluster, and rank placement.

Ranks are laid out as Megatron-LM does (order ``tp-dp-pp``, TP fastest)::

    rank = tp_rank + tp * (dp_rank + dp * pp_rank)

and GPU ``g`` of the job is ``rank``; it sits in server ``g // gpus_per_server``. TP groups are
therefore consecutive GPUs of one server, DP groups stride by ``tp`` and PP groups by ``tp * dp``.

>>> from mvopt.config import ParallelismConfig
>>> lay = Layout(ParallelismConfig(tp=2, pp=2, dp=2, global_batch=8), gpus_per_server=4)
>>> lay.coords(5)
Coords(tp=1, pp=1, dp=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mvopt.config import ParallelismConfig
from mvopt.errors import InfeasibleError
from mvopt.workload.models import ModelSpec

__all__ = ["Coords", "Layout", "layout_problems", "check_layout", "num_microbatches", "ep_dp_groups",
           "expert_dp_groups"]


class Coords(NamedTuple):
    """Position of a rank in the three parallel dimensions."""

    tp: int
    pp: int
    dp: int


def num_microbatches(par: ParallelismConfig) -> int:
    """Micro-batches each pipeline runs per iteration: global_batch / (micro_batch * dp)."""
    return par.global_batch // (par.micro_batch * par.dp)


def ep_dp_groups(par: ParallelismConfig) -> np.ndarray:
    """DP indices of every EP group, shape (dp / ep, ep): ``packed`` groups are ``ep`` consecutive
    DP ranks (Megatron's order, EP inside DP), ``spread`` groups take DP ranks ``dp / ep`` apart.
    Column ``e`` is the group's EP rank ``e``."""
    dp, ep = par.dp, par.ep
    idx = np.arange(dp, dtype=np.int64)
    if par.ep_placement == "packed":
        return idx.reshape(dp // ep, ep)
    return idx.reshape(ep, dp // ep).T.copy()


def expert_dp_groups(par: ParallelismConfig) -> np.ndarray:
    """DP indices of every expert-data-parallel group (the ranks holding the same experts, which
    reduce their gradients together), shape (ep, dp / ep)."""
    return ep_dp_groups(par).T.copy()


def layout_problems(model: ModelSpec, par: ParallelismConfig, *, gpus_per_server: int,
                    gpus: int | None = None) -> list[str]:
    """Every reason why ``par`` cannot run ``model`` (empty list: feasible).

    Rules (each one Megatron-LM enforces or the model assumes): TP stays inside a server; TP
    divides heads, KV heads and FFN width; layers divide into pp * virtual_stages equal chunks;
    the interleaved schedule needs pp >= 2 and a micro-batch count divisible by pp; the global batch
    divides into micro_batch * dp; sequence parallelism needs seq_len divisible by tp; ep > 1 needs
    a model with experts, ep dividing its experts and dp; cp > 1 needs a model without sliding
    windows (not modelled); and tp * pp * dp equals the GPU count when one is given.
    """
    p = []
    tp, pp, dp, v = par.tp, par.pp, par.dp, par.virtual_stages
    if tp > gpus_per_server:
        p.append(f"parallelism.tp = {tp} exceeds the {gpus_per_server} GPUs of a server "
                 "(tensor parallelism must stay on NVLink)")
    elif gpus_per_server % tp:
        p.append(f"parallelism.tp = {tp} must divide gpus_per_server = {gpus_per_server}")
    for what, size in (("heads", model.heads), ("kv_heads", model.kv_heads), ("ffn", model.ffn)):
        if size % tp:
            p.append(f"parallelism.tp = {tp} must divide the model's {what} ({size})")
    if model.layers % (pp * v):
        p.append(f"layers ({model.layers}) must be divisible by pp * virtual_stages = {pp} * {v}")
    if v > 1 and pp < 2:
        p.append(f"parallelism.virtual_stages = {v} (interleaved schedule) needs pp >= 2, got pp = {pp}")
    if par.global_batch % (par.micro_batch * dp):
        p.append(f"parallelism.global_batch = {par.global_batch} must be divisible by micro_batch * dp "
                 f"= {par.micro_batch} * {dp}")
    elif v > 1 and num_microbatches(par) % pp:
        p.append(f"the interleaved schedule needs the micro-batch count ({num_microbatches(par)}) to be "
                 f"divisible by pp = {pp}")
    if par.sequence_parallel and model.seq_len % tp:
        p.append(f"sequence parallelism needs seq_len ({model.seq_len}) divisible by tp = {tp}")
    cp = par.cp
    if cp > 1:
        if model.seq_len % (2 * cp):
            p.append(f"parallelism.cp = {cp} needs seq_len ({model.seq_len}) divisible by 2 * cp (each rank "
                     "holds two of the 2 cp chunks of a sequence)")
        elif par.sequence_parallel and (model.seq_len // cp) % tp:
            p.append(f"sequence parallelism with cp = {cp} needs seq_len / cp ({model.seq_len // cp}) "
                     f"divisible by tp = {tp}")
        if model.has_sliding_window:
            p.append(f"parallelism.cp = {cp} with sliding-window attention ({model.name}) is not modelled "
                     "(the ring would skip the blocks outside the window)")
    if par.fsdp and par.distributed_optimizer:
        p.append("parallelism.fsdp already shards the optimizer state: distributed_optimizer must be false")
    if par.fsdp and par.ep > 1:
        p.append(f"parallelism.fsdp with ep = {par.ep} is not modelled (expert weights would shard over "
                 "the expert-data-parallel group)")
    ep = par.ep
    if ep > 1:
        if not model.is_moe:
            p.append(f"parallelism.ep = {ep} needs a model with experts ({model.name} has none)")
        elif model.experts % ep:
            p.append(f"parallelism.ep = {ep} must divide the model's experts ({model.experts})")
        if (dp * cp) % ep:
            p.append(f"parallelism.ep = {ep} must divide dp * cp = {dp} * {cp} (expert parallelism spreads "
                     "the experts over the data- and context-parallel ranks)")
    if gpus is not None and tp * pp * dp * cp != gpus:
        p.append(f"tp * pp * dp * cp = {tp} * {pp} * {dp} * {cp} = {tp * pp * dp * cp} must equal the {gpus} "
                 "GPUs of the cluster")
    return p


def check_layout(model: ModelSpec, par: ParallelismConfig, *, gpus_per_server: int,
                 gpus: int | None = None) -> None:
    """Raise :class:`InfeasibleError` listing every problem of :func:`layout_problems`."""
    problems = layout_problems(model, par, gpus_per_server=gpus_per_server, gpus=gpus)
    if problems:
        raise InfeasibleError("infeasible parallel layout: " + "; ".join(problems))


@dataclass(frozen=True)
class Layout:
    """Rank <-> (tp, pp, dp) <-> GPU <-> server mapping of one job (Megatron order, TP fastest)."""

    par: ParallelismConfig
    gpus_per_server: int

    @property
    def world_size(self) -> int:
        return self.par.tp * self.par.pp * self.par.dp * self.par.cp

    @property
    def servers(self) -> int:
        """Servers the job occupies (the last one may be partly used)."""
        return -(-self.world_size // self.gpus_per_server)

    def coords(self, rank: int) -> Coords:
        """(tp, pp, dp) coordinates of ``rank``."""
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} outside 0..{self.world_size - 1}")
        tp, dp = self.par.tp, self.par.dp
        return Coords(tp=rank % tp, pp=rank // (tp * dp), dp=(rank // tp) % dp)

    def rank(self, tp: int, pp: int, dp: int) -> int:
        """Rank (= GPU index) at the given coordinates."""
        return tp + self.par.tp * (dp + self.par.dp * pp)

    def server(self, rank: int) -> int:
        """Server that holds ``rank``'s GPU."""
        return rank // self.gpus_per_server

    def local_gpu(self, rank: int) -> int:
        """Index of ``rank``'s GPU inside its server."""
        return rank % self.gpus_per_server

    def _grid(self) -> np.ndarray:
        """Ranks as an array indexed [pp, dp, tp]."""
        return np.arange(self.world_size, dtype=np.int64).reshape(self.par.pp, self.par.dp, self.par.tp)

    def tp_groups(self) -> np.ndarray:
        """TP groups, shape (pp * dp, tp): row i lists the ranks of one group."""
        return self._grid().reshape(-1, self.par.tp)

    def dp_groups(self) -> np.ndarray:
        """DP groups, shape (pp * tp, dp)."""
        return self._grid().transpose(0, 2, 1).reshape(-1, self.par.dp)

    def pp_groups(self) -> np.ndarray:
        """Pipelines, shape (dp * tp, pp): column j is stage j."""
        return self._grid().transpose(1, 2, 0).reshape(-1, self.par.pp)

    def servers_of(self, ranks: np.ndarray) -> np.ndarray:
        """Server index of each rank (any array shape)."""
        return np.asarray(ranks) // self.gpus_per_server
