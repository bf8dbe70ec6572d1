"""The compiled topology: the engine's input, as flat numpy arrays (see docs/topologies.md).

Node ids: hosts ``0..n_host-1``, then switches ``n_host..n_node-1`` (switch s = node n_host+s).
Ports: one per direction of a link, owned by the sending node, CSR by owner
(``node_port_offset``). Routing: per switch a sorted list of destination-host ranges
(``sw_route_offset``, ``route_dst_lo``, ``route_nhset``) pointing at deduplicated next-hop sets of
global port ids (``nhset_offset``, ``nhset_port``). Servers and GPUs: ``host_server``, ``gpu_host``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from mvopt.errors import InputFileError
from mvopt.files import write_atomic

__all__ = ["CompiledTopology", "FORMAT_VERSION"]

FORMAT_VERSION = 1

# name -> dtype of every array field (the contract with the engine)
ARRAY_DTYPES: dict[str, Any] = {
    "node_tier": np.int8,
    "node_port_offset": np.int64,
    "port_node": np.int32,
    "port_peer_node": np.int32,
    "port_peer_port": np.int32,
    "port_rate_bps": np.int64,
    "port_delay_ps": np.int64,
    "port_tier": np.int8,
    "sw_route_offset": np.int64,
    "route_dst_lo": np.int32,
    "route_nhset": np.int32,
    "nhset_offset": np.int64,
    "nhset_port": np.int32,
    "host_server": np.int32,
    "gpu_host": np.int32,
}
_SCALARS = ("kind", "n_host", "n_server", "gpus_per_server", "diameter_hops")


@dataclass(frozen=True, eq=False)
class CompiledTopology:
    """A network with its routing tables, ready for the engine. Arrays are read-only."""

    kind: str                      # fat_tree, leaf_spine, rail_optimized, torus, dragonfly, file, graph
    parameters: dict[str, Any]     # what it was built from (JSON-ready)
    n_host: int
    node_tier: np.ndarray          # int8[n_node]: 0 host, 1 first switch layer (and routers), 2, 3
    node_port_offset: np.ndarray   # int64[n_node+1]: ports of node v are [off[v], off[v+1])
    port_node: np.ndarray          # int32[n_port]: owner (sender)
    port_peer_node: np.ndarray     # int32[n_port]: receiver
    port_peer_port: np.ndarray     # int32[n_port]: receiver's port on the same link
    port_rate_bps: np.ndarray      # int64[n_port]
    port_delay_ps: np.ndarray      # int64[n_port]
    port_tier: np.ndarray          # int8[n_port]: 0 = host link
    sw_route_offset: np.ndarray    # int64[n_switch+1]: routes of switch s are [off[s], off[s+1])
    route_dst_lo: np.ndarray       # int32[n_route]: first destination host of the range
    route_nhset: np.ndarray        # int32[n_route]: next-hop set id
    nhset_offset: np.ndarray       # int64[n_nhset+1]
    nhset_port: np.ndarray         # int32: global port ids, sorted within each set
    host_server: np.ndarray        # int32[n_host]
    gpu_host: np.ndarray           # int32[n_server*gpus_per_server]: the NIC (host) of each GPU
    n_server: int
    gpus_per_server: int
    diameter_hops: int             # longest host-to-host shortest path, in links
    # links going down during the run, by time: (at_ps, port, peer port); the routes above are
    # those before the first (the engine routes around each from its time: engine/routes.py)
    link_down: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self) -> None:
        for name, dtype in ARRAY_DTYPES.items():
            arr = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    # ---------------------------------------------------------------- sizes
    @property
    def n_node(self) -> int:
        return int(self.node_tier.size)

    @property
    def n_switch(self) -> int:
        return self.n_node - self.n_host

    @property
    def n_port(self) -> int:
        return int(self.port_node.size)

    @property
    def n_link(self) -> int:
        return self.n_port // 2

    @property
    def n_route(self) -> int:
        return int(self.route_dst_lo.size)

    @property
    def n_nhset(self) -> int:
        return int(self.nhset_offset.size) - 1

    @property
    def n_gpu(self) -> int:
        return int(self.gpu_host.size)

    # ---------------------------------------------------------------- lookups
    def host_port(self, host: int) -> int:
        """The single port of a host."""
        return int(self.node_port_offset[host])

    def next_hop_ports(self, node: int, dst_host: int) -> np.ndarray:
        """Global ids of every equal-cost next-hop port from ``node`` towards ``dst_host``.

        A host's answer is its single port (empty when it is the destination); a switch's comes
        from its range table by binary search.
        """
        if not 0 <= dst_host < self.n_host:
            raise ValueError(f"destination {dst_host} is not a host (0..{self.n_host - 1})")
        if not 0 <= node < self.n_node:
            raise ValueError(f"node {node} out of range (0..{self.n_node - 1})")
        if node < self.n_host:
            return self.port_node[:0] if node == dst_host else self.node_port_offset[node:node + 1].astype(np.int32)
        s = node - self.n_host
        lo, hi = int(self.sw_route_offset[s]), int(self.sw_route_offset[s + 1])
        r = lo + int(np.searchsorted(self.route_dst_lo[lo:hi], dst_host, side="right")) - 1
        k = int(self.route_nhset[r])
        return self.nhset_port[self.nhset_offset[k]:self.nhset_offset[k + 1]]

    def link_endpoints(self) -> np.ndarray:
        """One row per undirected link: the port ids ``(p, peer_port)`` with ``p < peer_port``."""
        p = np.flatnonzero(np.arange(self.n_port) < self.port_peer_port)
        return np.stack([p, self.port_peer_port[p]], axis=1)

    def summary(self) -> dict[str, Any]:
        """Counts, bisection bandwidth, diameter (see :func:`mvopt.cluster.summary.summarize`)."""
        from mvopt.cluster.summary import summarize
        return summarize(self)

    def to_networkx(self):
        """A networkx view: nodes with ``role`` (host/switch) and ``tier``; edges with ``rate``
        (Gb/s), ``delay`` (ns) and ``tier``. A MultiGraph when some links are parallel."""
        import networkx as nx
        ends = self.link_endpoints()
        a, b = self.port_node[ends[:, 0]], self.port_peer_node[ends[:, 0]]
        pairs = np.sort(np.stack([a, b], axis=1), axis=1)
        parallel = np.unique(pairs, axis=0).shape[0] < pairs.shape[0]
        g = nx.MultiGraph() if parallel else nx.Graph()
        for v in range(self.n_node):
            g.add_node(v, role="host" if v < self.n_host else "switch", tier=int(self.node_tier[v]))
        rate = self.port_rate_bps[ends[:, 0]] / 1e9
        delay = self.port_delay_ps[ends[:, 0]] / 1e3
        tier = self.port_tier[ends[:, 0]]
        g.add_edges_from((int(x), int(y), {"rate": float(r), "delay": float(d), "tier": int(t)})
                         for x, y, r, d, t in zip(a, b, rate, delay, tier))
        return g

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write an ``.npz`` file atomically (temporary file in the same folder, then rename)."""
        path = Path(path)
        meta = {name: getattr(self, name) for name in _SCALARS}
        meta.update(format_version=FORMAT_VERSION, parameters=self.parameters,
                    link_down=[list(d) for d in self.link_down])
        arrays = {name: getattr(self, name) for name in ARRAY_DTYPES}
        write_atomic(path, lambda f: np.savez(f, meta=np.array(json.dumps(meta)), **arrays), binary=True)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CompiledTopology":
        """Read a file written by :meth:`save`; a damaged or foreign file raises InputFileError."""
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                arrays = {name: z[name] for name in ARRAY_DTYPES}
        except (OSError, KeyError, ValueError) as e:
            raise InputFileError(str(path), None, f"not a compiled topology ({e})") from None
        if meta.get("format_version") != FORMAT_VERSION:
            raise InputFileError(str(path), None, f"compiled-topology format "
                                 f"{meta.get('format_version')!r}, expected {FORMAT_VERSION}")
        topo = cls(parameters=meta["parameters"], **{k: meta[k] for k in _SCALARS}, **arrays,
                   link_down=tuple(tuple(int(x) for x in d) for d in meta.get("link_down", [])))
        problem = topo.structure_problem()
        if problem:
            raise InputFileError(str(path), None, f"inconsistent compiled topology: {problem}")
        return topo

    def structure_problem(self) -> str | None:
        """A sentence naming the first broken structural invariant, or None when consistent."""
        n, off = self.n_node, self.node_port_offset
        checks = [
            (off.size == n + 1 and off[0] == 0 and off[-1] == self.n_port and (np.diff(off) >= 0).all(),
             "node_port_offset is not a CSR over nodes"),
            (all(getattr(self, k).size == self.n_port for k in ARRAY_DTYPES if k.startswith("port_")),
             "port columns differ in length"),
            ((np.diff(off)[:self.n_host] == 1).all(), "a host without exactly one port"),
            (((self.port_peer_port >= 0) & (self.port_peer_port < self.n_port)).all(), "port_peer_port out of range"),
        ]
        for ok, msg in checks:
            if not ok:
                return msg
        pp = self.port_peer_port
        later = [
            ((pp[pp] == np.arange(self.n_port)).all(), "port_peer_port is not an involution"),
            ((self.port_node[pp] == self.port_peer_node).all(), "port_peer_port does not match port_peer_node"),
            ((np.repeat(np.arange(n), np.diff(off)) == self.port_node).all(), "port_node disagrees with the CSR"),
            (self.sw_route_offset.size == self.n_switch + 1 and self.sw_route_offset[-1] == self.n_route,
             "sw_route_offset is not a CSR over switches"),
            (self.n_route == 0 or (self.route_nhset >= 0).all() and (self.route_nhset < self.n_nhset).all(),
             "route_nhset out of range"),
            (self.nhset_offset[-1] == self.nhset_port.size, "nhset_offset does not cover nhset_port"),
            (self.gpu_host.size == self.n_server * self.gpus_per_server, "gpu_host has the wrong length"),
        ]
        for ok, msg in later:
            if not ok:
                return msg
        return None

    def __repr__(self) -> str:
        return (f"CompiledTopology(kind={self.kind!r}, hosts={self.n_host}, switches={self.n_switch}, "
                f"links={self.n_link}, routes={self.n_route}, nhsets={self.n_nhset})")


assert {f.name for f in fields(CompiledTopology)} >= set(ARRAY_DTYPES)
