"""One collective over a group of GPUs of an imported workload, as the ``collective`` section
says NCCL runs it: shared by the ASTRA-sim/SimAI reader (:mod:`mvopt.io.astra`) and the Chakra
reader (:mod:`mvopt.io.chakra`).

All-reduce, all-gather and reduce-scatter go through
:func:`mvopt.comm.hierarchical.add_group_collective` (NVLink model inside a server, flows between
servers); all-to-all through :func:`mvopt.comm.alltoall.add_all_to_all` with ``size / members``
bytes to each peer and the ``collective.all_to_all`` algorithm. Sizes are per rank, as in
nccl-tests and ASTRA-sim's workloads (all-reduce buffer, all-gather output, reduce-scatter input).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

__all__ = ["GroupCollectives"]


class GroupCollectives:
    """Appends collectives over GPU ranks to a builder (GPU ``g`` on NIC ``host[g]`` of server
    ``server[g]``); ``collective`` is a CollectiveConfig or None (ring, concurrent all-to-all)."""

    def __init__(self, builder, *, host: Sequence[int], server: Sequence[int], intra: Callable[[str, float, int], float],
                 collective=None, nic_bytes_per_s: float = 12.5e9, step_latency_s: float = 5e-6,
                 chunk_gap_ps: int = 0, wire_factor: float | None = None) -> None:
        self.builder, self.host, self.server, self.intra = builder, list(host), list(server), intra
        self.a2a_algorithm = "concurrent" if collective is None else collective.all_to_all
        self.kw: dict = {}
        if collective is not None:
            self.kw = dict(algorithm=collective.algorithm, channels=collective.channels,
                           chunk_bytes=collective.chunk_bytes, hierarchical=collective.hierarchical)
        self.kw.update(nic_bytes_per_s=nic_bytes_per_s, step_latency_s=step_latency_s, chunk_gap_ps=chunk_gap_ps,
                       fifo_wire_factor=wire_factor)

    def run(self, op: str, ranks: Sequence[int], nbytes: int, after: Mapping[int, Sequence[int]],
            category: str) -> dict[int, list[int]]:
        """Append ``op`` of ``nbytes`` per rank over ``ranks``; ``after`` and the result are keyed
        by position in ``ranks`` (the result: the tasks whose completion completes it there)."""
        from mvopt.comm.alltoall import add_all_to_all, even_matrix
        from mvopt.comm.hierarchical import add_group_collective

        hosts, servers = [self.host[g] for g in ranks], [self.server[g] for g in ranks]
        if op == "all_to_all":
            return add_all_to_all(self.builder, hosts, servers, even_matrix(len(ranks), nbytes),
                                  algorithm=self.a2a_algorithm, intra=self.intra, after=after, category=category)
        return add_group_collective(self.builder, op, hosts, servers, nbytes, intra=self.intra, after=after,
                                    category=category, **self.kw)
