"""Collectives over GPUs spread across servers: intra-server steps analytical, inter-server on the network.

:func:`add_group_collective` appends one collective over a group of GPU ranks (``members``: each
a host, i.e. the NIC the GPU uses, and a server) to a task-graph builder, choosing the shape
from where the members sit:

* all on one server: one ``delay`` per member, the intra-server model's time for the whole
  group (NVLink/NVSwitch, :class:`mvopt.comm.intra.IntraServerModel` passed in as ``intra``);
* one member per server: the network algorithm (ring, double binary tree, or ``auto``) over
  the members' NICs (:mod:`mvopt.comm.collectives`, :mod:`mvopt.comm.tree`);
* ``g`` members on each of ``k`` servers (hierarchical, the default): all-reduce = intra-server
  reduce-scatter of ``S`` (delay) -> ``g`` inter-server all-reduces of ``S/g``, one per local
  position (slot ``i`` = the ``i``-th member of every server, each on its own NIC, so that on a
  rail-optimised cluster every slot stays on its rail) -> intra-server all-gather of ``S``;
  reduce-scatter = intra reduce-scatter of ``S`` -> inter reduce-scatter of ``S/g``; all-gather
  = inter all-gather of ``S/g`` -> intra all-gather of ``S``. A member's intra-server step
  depends only on that member's own inputs: the members of a server run identical schedules,
  so they reach it together (this keeps every dependency local to its host);
* otherwise (``hierarchical=False``, uneven servers, all-to-all): a flat ring over the members
  in order where an edge between two members of one server is an NVLink transfer (a ``delay``
  of the intra-server send/recv time) and every other edge a flow.

``kept`` (optional, one bool per member) restricts the graph to some members (symmetry sampling,
see docs/training-model.md): intra-server steps are built for kept members only, and every
network collective must have all its members kept or none (ConfigError otherwise).
Sizes follow nccl-tests (all-reduce buffer, all-gather output, reduce-scatter input, per rank).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from mvopt.comm.collectives import add_collective
from mvopt.comm.tree import add_tree_collective, choose_algorithm
from mvopt.errors import ConfigError

__all__ = ["add_group_collective", "add_network_collective", "group_shape"]

IntraTime = Callable[[str, float, int], float]   # (collective, bytes per rank, gpus) -> seconds


def _ps(seconds: float) -> int:
    return int(round(float(seconds) * 1e12))


def group_shape(servers: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """Servers in order of first appearance and the member indices on each."""
    order: list[int] = []
    members: dict[int, list[int]] = {}
    for i, s in enumerate(servers):
        if s not in members:
            members[s] = []
            order.append(s)
        members[s].append(i)
    return order, [members[s] for s in order]


class _Fifo:
    """Builder proxy: the flows of one collective on a connection (src, dst) leave in order. A
    flow waits for a zero-dependency-cost *gate* of the previous flow on its connection: a delay
    on the sender, released with that flow, lasting its serialization at line rate (``wire``
    seconds per byte). This stands for NCCL's in-order connection (step s+1 is sent after step
    s); without it, a rank that receives several steps in a burst sends them all at once, they
    share the NIC and finish together, and the burst propagates around the ring."""

    def __init__(self, builder, wire_s_per_byte: float):
        self.b, self.wire = builder, wire_s_per_byte
        self.gate: dict[tuple[int, int], int] = {}

    def flow(self, src: int, dst: int, size_bytes: int, *, after=(), start_ps: int = 0, category: str = "flow") -> int:
        deps = list(after)
        g = self.gate.get((src, dst))
        if g is not None:
            deps.append(g)
        self.gate[(src, dst)] = self.b.delay(src, _ps(size_bytes * self.wire), after=deps, category=category)
        return self.b.flow(src, dst, size_bytes, after=deps, category=category)

    def delay(self, node: int, duration_ps: int, *, after=(), start_ps: int = 0, category: str = "delay") -> int:
        return self.b.delay(node, duration_ps, after=after, category=category)


def add_network_collective(builder, op: str, hosts: Sequence[int], size_bytes: int, *, algorithm: str = "ring",
                           channels: int = 1, chunk_bytes: int | None = None, chunk_gap_ps: int = 0,
                           after: Mapping[int, Sequence[int]] | None = None, category: str | None = None,
                           nic_bytes_per_s: float = 12.5e9, step_latency_s: float = 5e-6,
                           fifo_wire_factor: float | None = None, where: str = "collective") -> dict[int, list[int]]:
    """Ring or double-binary-tree collective over distinct ``hosts`` (``algorithm`` ring, tree or
    auto; see :func:`mvopt.comm.tree.choose_algorithm`). Returns completion tasks per host.

    ``fifo_wire_factor`` (wire bytes per payload byte, e.g. (payload + header) / payload) turns on
    in-order connections (:class:`_Fifo`) at ``nic_bytes_per_s``."""
    algo = choose_algorithm(algorithm, op, len(hosts), size_bytes, nic_bytes_per_s, step_latency_s)
    kw = dict(channels=channels, chunk_bytes=chunk_bytes, chunk_gap_ps=chunk_gap_ps, after=after,
              category=category, where=where)
    b = builder if fifo_wire_factor is None else _Fifo(builder, fifo_wire_factor / nic_bytes_per_s)
    if algo == "tree":
        return add_tree_collective(b, op, hosts, size_bytes, **kw)
    return add_collective(b, op, hosts, size_bytes, **kw)


class _MixedRing:
    """Builder proxy: virtual ids are members; a flow between members of one server becomes an
    NVLink transfer (delay on the receiving member's host)."""

    def __init__(self, builder, hosts: Sequence[int], servers: Sequence[int], intra: IntraTime):
        self.b, self.hosts, self.servers, self.intra = builder, list(hosts), list(servers), intra

    def flow(self, src: int, dst: int, size_bytes: int, *, after=(), start_ps: int = 0, category: str = "flow") -> int:
        if self.servers[src] == self.servers[dst]:
            return self.b.delay(self.hosts[dst], _ps(self.intra("send_recv", size_bytes, 2)), after=after,
                                category=category)
        return self.b.flow(self.hosts[src], self.hosts[dst], size_bytes, after=after, category=category)

    def delay(self, node: int, duration_ps: int, *, after=(), start_ps: int = 0, category: str = "delay") -> int:
        return self.b.delay(self.hosts[node], duration_ps, after=after, category=category)


def add_group_collective(builder, op: str, hosts: Sequence[int], servers: Sequence[int], size_bytes: int, *,
                         intra: IntraTime, algorithm: str = "ring", channels: int = 1,
                         chunk_bytes: int | None = None, chunk_gap_ps: int = 0, hierarchical: bool | None = None,
                         after: Mapping[int, Sequence[int]] | None = None, category: str | None = None,
                         kept: Sequence[bool] | None = None, nic_bytes_per_s: float = 12.5e9,
                         step_latency_s: float = 5e-6, fifo_wire_factor: float | None = None,
                         where: str = "collective") -> dict[int, list[int]]:
    """Append one collective over members ``i`` (on host ``hosts[i]`` of server ``servers[i]``).

    ``after`` and the result are keyed by member index (members may share a host). Returns, per
    kept member, the tasks whose completion means the collective is complete for it (they
    finish on its host). ``hierarchical`` None or True: hierarchical when the servers hold equal
    numbers of members (see the module docstring); False: the flat mixed ring.
    """
    n = len(hosts)
    if len(servers) != n:
        raise ValueError("hosts and servers differ in length")
    kept = [True] * n if kept is None else [bool(k) for k in kept]
    after = {int(k): list(v) for k, v in (after or {}).items()}
    category = category or op
    done: dict[int, list[int]] = {i: [] for i in range(n) if kept[i]}
    if n < 2 or size_bytes <= 0:
        return done
    order, by_server = group_shape(servers)
    counts = {len(m) for m in by_server}
    net_kw = dict(algorithm=algorithm, channels=channels, chunk_bytes=chunk_bytes, chunk_gap_ps=chunk_gap_ps,
                  category=category, nic_bytes_per_s=nic_bytes_per_s, step_latency_s=step_latency_s,
                  fifo_wire_factor=fifo_wire_factor, where=where)

    def network(op_: str, idx: list[int], nbytes: int, deps: Mapping[int, Sequence[int]]) -> dict[int, list[int]]:
        flags = {kept[i] for i in idx}
        if flags == {False}:
            return {}
        if len(flags) > 1:
            raise ConfigError("workload.rail_sample", "needs every network collective to involve only "
                              "sampled GPUs or none (here a collective spans GPUs of several local "
                              "positions; use hierarchical collectives and a layout whose inter-server "
                              "traffic stays on one rail)", True)
        if len(idx) < 2:
            return {idx[0]: list(deps.get(idx[0], []))}
        hs = [hosts[i] for i in idx]
        res = add_network_collective(builder, op_, hs, nbytes, after={hosts[i]: deps.get(i, []) for i in idx},
                                     **net_kw)
        return {i: res[hosts[i]] for i in idx}

    def intra_step(op_: str, i: int, nbytes: float, g: int, deps: Sequence[int]) -> int:
        return builder.delay(hosts[i], _ps(intra(op_, nbytes, g)), after=deps, category=category)

    if len(order) == 1:                                       # one server: NVLink only
        for i in range(n):
            if kept[i]:
                done[i] = [intra_step(op, i, size_bytes, n, after.get(i, []))]
        return done
    if counts == {1}:                                         # one member per server
        res = network(op, list(range(n)), size_bytes, after)
        for i in done:
            done[i] = res.get(i, [])
        return done
    if hierarchical is not False and len(counts) == 1 and op != "all_to_all":
        g = counts.pop()
        slots = [[by_server[s][j] for s in range(len(order))] for j in range(g)]
        part = max(1, size_bytes // g)
        first: dict[int, list[int]] = {}
        for i in range(n):
            if kept[i]:
                deps = after.get(i, [])
                first[i] = [intra_step("reduce_scatter", i, size_bytes, g, deps)] if op != "all_gather" else deps
        inter_op = {"all_reduce": "all_reduce", "reduce_scatter": "reduce_scatter", "all_gather": "all_gather"}[op]
        mid: dict[int, list[int]] = {}
        for idx in slots:
            mid.update(network(inter_op, idx, part, first))
        for i in done:
            deps = mid.get(i, [])
            if op in ("all_reduce", "all_gather"):
                done[i] = [intra_step("all_gather", i, size_bytes, g, deps)]
            else:
                done[i] = deps
        return done
    # flat ring over the members, NVLink edges inside a server
    if not all(kept):
        raise ConfigError("workload.rail_sample", "cannot sample a flat collective over several GPUs of "
                          "a server (use hierarchical collectives)", True)
    proxy = _MixedRing(builder, hosts, servers, intra)
    res = add_collective(proxy, op, list(range(n)), size_bytes, channels=channels, chunk_bytes=chunk_bytes,
                         chunk_gap_ps=chunk_gap_ps, after=after, category=category, where=where)
    for i in done:
        done[i] = res[i]
    return done
