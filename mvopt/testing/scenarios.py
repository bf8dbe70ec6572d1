"""Tiny network scenarios shared by the engine tests.

:class:`MiniTopology` has exactly the engine-facing attributes of
:class:`mvopt.cluster.CompiledTopology` (``n_host``, ``n_node``, ``node_port_offset``, per-port
``port_node``/``port_peer_node``/``port_peer_port``/``port_rate_bps``/``port_delay_ps`` and
``next_hop_ports(node, dst_host)``) and is built from a plain link list, so that a test can state
a topology in one line: a line of switches, a star, a dumbbell, a leaf-spine, or anything with
hand-written routes (e.g. a ring routed one way round, to provoke a PFC deadlock).

Units in the builders' arguments are Gb/s and ns (as in the configuration); the arrays are bits/s
and ps (as in the engine). :func:`experiment` wraps a topology and tasks into an
:class:`~mvopt.engine.params.Experiment`, with the ``network`` section given as keyword overrides.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mvopt._cfg.algorithms import CC_NAMES, LOAD_BALANCERS
from mvopt._cfg.base import build
from mvopt._cfg.network import NetworkConfig
from mvopt.engine.params import TAG_ECMP, Experiment, hash64
from mvopt.engine.tasks import TaskGraph, TaskGraphBuilder

__all__ = ["MiniTopology", "Link", "line", "star", "dumbbell", "leaf_spine", "ring",
           "network", "experiment", "incast", "fat_tree_flows", "fat_tree_incast", "mixed_experiments",
           "rail_allreduce"]

GBPS = 10**9
NS = 1000

# (a, b) or (a, b, rate_gbps, delay_ns): an undirected link between nodes a and b
Link = tuple


class MiniTopology:
    """A small topology with shortest-path ECMP routing (or explicit routes).

    Nodes ``0..n_host-1`` are hosts (exactly one link each), the rest switches. Each link gives
    two directed ports, owned by the sending node; a node's ports are ordered by peer node id.
    ``routes`` optionally maps ``(switch, dst_host)`` to next-hop *nodes*, overriding the
    shortest paths for those pairs.
    """

    def __init__(self, n_host: int, n_switch: int, links: Iterable[Link], *, rate_gbps: float = 100,
                 delay_ns: float = 1000, routes: Mapping[tuple[int, int], Sequence[int]] | None = None) -> None:
        self.n_host = n_host
        self.n_node = n_host + n_switch
        ends: list[tuple[int, int, int, int]] = []   # (owner, peer, rate_bps, delay_ps) per port
        for link in links:
            a, b = int(link[0]), int(link[1])
            rate = int(round((link[2] if len(link) > 2 else rate_gbps) * GBPS))
            delay = int(round((link[3] if len(link) > 3 else delay_ns) * NS))
            ends += [(a, b, rate, delay), (b, a, rate, delay)]
        # Stable sort by (owner, peer); remember where each directed end went.
        order = sorted(range(len(ends)), key=lambda i: (ends[i][0], ends[i][1]))
        new_id = {old: new for new, old in enumerate(order)}
        self.port_node = np.array([ends[i][0] for i in order], np.int32)
        self.port_peer_node = np.array([ends[i][1] for i in order], np.int32)
        self.port_peer_port = np.array([new_id[i ^ 1] for i in order], np.int32)
        self.port_rate_bps = np.array([ends[i][2] for i in order], np.int64)
        self.port_delay_ps = np.array([ends[i][3] for i in order], np.int64)
        self.node_port_offset = np.searchsorted(self.port_node, np.arange(self.n_node + 1)).astype(np.int64)
        degree = np.diff(self.node_port_offset)
        if (degree[:n_host] != 1).any():
            raise ValueError("every host needs exactly one link")
        self._next_hops = self._shortest_path_routes()
        for (sw, dst), peers in (routes or {}).items():
            ports = [p for p in self.ports_of(sw) if int(self.port_peer_node[p]) in peers]
            self._next_hops[(sw, dst)] = np.array(sorted(ports), np.int32)

    @property
    def n_switch(self) -> int:
        return self.n_node - self.n_host

    def ports_of(self, node: int) -> range:
        """Global ids of the ports owned by ``node``."""
        return range(int(self.node_port_offset[node]), int(self.node_port_offset[node + 1]))

    def host_port(self, host: int) -> int:
        return int(self.node_port_offset[host])

    def next_hop_ports(self, node: int, dst_host: int) -> np.ndarray:
        """Sorted global ids of the equal-cost next-hop ports from ``node`` towards ``dst_host``."""
        if node < self.n_host:
            return np.array([] if node == dst_host else [self.host_port(node)], np.int32)
        return self._next_hops[(node, dst_host)]

    def _shortest_path_routes(self) -> dict[tuple[int, int], np.ndarray]:
        routes = {}
        for dst in range(self.n_host):
            dist = {dst: 0}
            frontier = deque([dst])
            while frontier:                      # BFS backwards; hosts never forward
                v = frontier.popleft()
                if v < self.n_host and v != dst:
                    continue
                for p in self.ports_of(v):
                    u = int(self.port_peer_node[p])
                    if u not in dist:
                        dist[u] = dist[v] + 1
                        frontier.append(u)
            for sw in range(self.n_host, self.n_node):
                if sw in dist:
                    routes[(sw, dst)] = np.array(
                        [p for p in self.ports_of(sw) if dist.get(int(self.port_peer_node[p]), -9) == dist[sw] - 1],
                        np.int32)
        return routes


# ------------------------------------------------------------------------------------ topologies


def line(switches: int = 1, *, rate_gbps: float = 100, delay_ns: float = 1000) -> MiniTopology:
    """Host 0 — switch — … — switch — host 1: ``switches + 1`` links in a row."""
    sw = [2 + i for i in range(switches)]
    chain = [0] + sw + [1]
    return MiniTopology(2, switches, zip(chain, chain[1:]), rate_gbps=rate_gbps, delay_ns=delay_ns)


def star(n_hosts: int, *, rate_gbps: float = 100, delay_ns: float = 1000) -> MiniTopology:
    """``n_hosts`` hosts on one switch (node ``n_hosts``)."""
    return MiniTopology(n_hosts, 1, [(h, n_hosts) for h in range(n_hosts)], rate_gbps=rate_gbps,
                        delay_ns=delay_ns)


def dumbbell(n_left: int, n_right: int, *, rate_gbps: float = 100, bottleneck_gbps: float | None = None,
             delay_ns: float = 1000) -> MiniTopology:
    """Hosts ``0..n_left-1`` on switch L, the next ``n_right`` on switch R, one L—R link."""
    n = n_left + n_right
    left, right = n, n + 1
    links: list[Link] = [(h, left) for h in range(n_left)] + [(h, right) for h in range(n_left, n)]
    links.append((left, right, bottleneck_gbps or rate_gbps, delay_ns))
    return MiniTopology(n, 2, links, rate_gbps=rate_gbps, delay_ns=delay_ns)


def leaf_spine(n_leaf: int = 2, n_spine: int = 2, hosts_per_leaf: int = 2, *, rate_gbps: float = 100,
               delay_ns: float = 1000) -> MiniTopology:
    """Two-tier Clos: every leaf linked to every spine; equal-cost paths through the spines."""
    n_host = n_leaf * hosts_per_leaf
    leaves = [n_host + i for i in range(n_leaf)]
    spines = [n_host + n_leaf + j for j in range(n_spine)]
    links: list[Link] = [(h, leaves[h // hosts_per_leaf]) for h in range(n_host)]
    links += [(leaf, spine) for leaf in leaves for spine in spines]
    return MiniTopology(n_host, n_leaf + n_spine, links, rate_gbps=rate_gbps, delay_ns=delay_ns)


def ring(n: int, *, rate_gbps: float = 100, delay_ns: float = 1000) -> MiniTopology:
    """``n`` switches in a ring, one host on each, routed clockwise only (a cyclic buffer dependency)."""
    sw = [n + i for i in range(n)]
    links: list[Link] = [(h, sw[h]) for h in range(n)] + [(sw[i], sw[(i + 1) % n]) for i in range(n)]
    routes = {(sw[i], dst): [sw[(i + 1) % n]] for i in range(n) for dst in range(n) if dst != i}
    return MiniTopology(n, n, links, rate_gbps=rate_gbps, delay_ns=delay_ns, routes=routes)


# ------------------------------------------------------------------------------------ experiments


def network(**overrides: Any) -> NetworkConfig:
    """A validated ``network`` section: defaults plus overrides (nested sections as dicts)."""
    return build(NetworkConfig, overrides, "network")


def experiment(topology: Any, tasks: TaskGraph | TaskGraphBuilder, *, seed: int = 1,
               time_limit_ps: int = 10 * 10**12, name: str = "scenario", queue_monitor_ps: int = 0,
               link_monitor: bool = False, monitor_max_samples: int = 1000, **net: Any) -> Experiment:
    """An Experiment on ``topology`` running ``tasks`` with ``network`` overrides ``net`` (and the
    monitors of docs/engine.md when ``queue_monitor_ps`` > 0)."""
    graph = tasks.build() if isinstance(tasks, TaskGraphBuilder) else tasks
    return Experiment(topology=topology, network=network(**net), tasks=graph, seed=seed,
                      time_limit_ps=time_limit_ps, name=name, queue_monitor_ps=queue_monitor_ps,
                      link_monitor=link_monitor, monitor_max_samples=monitor_max_samples)


def incast(n_senders: int, size_bytes: int, *, rate_gbps: float = 100, delay_ns: float = 1000,
           **net: Any) -> Experiment:
    """``n_senders`` hosts of a star send ``size_bytes`` each to host 0, all starting at 0."""
    g = TaskGraphBuilder()
    for src in range(1, n_senders + 1):
        g.flow(src, 0, size_bytes)
    return experiment(star(n_senders + 1, rate_gbps=rate_gbps, delay_ns=delay_ns), g,
                      name=f"incast{n_senders}", **net)


def fat_tree_flows(pairs: Sequence[tuple[int, int]], size: int, **net: Any) -> Experiment:
    """Flows of `size` bytes between (src, dst) hosts of a k=4 fat-tree, all at once, no
    congestion control unless `net` says (network overrides)."""
    from mvopt.cluster import build_topology
    from mvopt.config import load_config
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none", **net}})
    g = TaskGraphBuilder()
    for src, dst in pairs:
        g.flow(src, dst, size)
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), name="fat-tree")


def fat_tree_incast(**net: Any) -> Experiment:
    """15 hosts of a k=4 fat-tree send 2 MB each to host 0 at line rate: a deep queue at its
    switch (~6,800 packets at the peak with PFC on)."""
    return fat_tree_flows([(s, 0) for s in range(1, 16)], 2_000_000, **net)


def ecmp_path(topo, seed: int, flow: int, src: int, dst: int) -> list[int]:
    """Ports a flow's packets take under ECMP from host src to host dst, the host's own first,
    walked through the topology's next-hop sets (as docs/engine.md hashes them)."""
    port = int(topo.node_port_offset[src])
    path = [port]
    node = int(topo.port_peer_node[port])
    while node != dst:
        nh = topo.next_hop_ports(node, dst)
        port = int(nh[hash64(seed, TAG_ECMP, node, flow) % len(nh)])
        path.append(port)
        node = int(topo.port_peer_node[port])
    return path


def mixed_experiments(n: int = 9) -> list[Experiment]:
    """`n` small experiments that differ in everything a batch may mix: topology (fat-tree,
    leaf-spine, torus), congestion control (every algorithm, in turn), load balancing (every mode),
    task graph (dependencies, a delay task) and seed."""
    from mvopt.cluster import build_topology
    from mvopt.config import load_config
    out = []
    for i in range(n):
        topo = [{"topology": "fat_tree", "k": 4},
                {"topology": "leaf_spine", "leaves": 3, "hosts_per_leaf": 4, "oversubscription": 2.0},
                {"topology": "torus", "torus_dims": [3, 3]}][i % 3]
        cfg = load_config({"cluster": topo, "network": {"cc": CC_NAMES[i % len(CC_NAMES)],
                                                        "lb": LOAD_BALANCERS[i % len(LOAD_BALANCERS)]}})
        t = build_topology(cfg.cluster)
        g = TaskGraphBuilder()
        h = int(t.n_host)
        first = g.flow(0, h - 1, 20_000 + 7_000 * i)
        for k in range(1 + i % 4):
            src, dst = (k + 1) % h, (k + 3 + i) % h
            dst = dst if dst != src else (dst + 1) % h      # (from n = 11 on, a flow would loop back)
            g.flow(src, dst, 30_000 * (k + 1), after=[first] if k % 2 else [])
        g.delay(1, 2_000_000, after=[first])
        out.append(Experiment(topology=t, network=cfg.network, tasks=g.build(), name=f"e{i}", seed=i))
    return out


def rail_allreduce(cc: str, lb: str, servers: int = 8, size: int = 256 << 10) -> Experiment:
    """A ring all-reduce of `size` bytes on a rail-optimised cluster of `servers` servers of 8
    NICs: its rail switches have 2 x `servers` ports, wider than the engine's thread-local switch
    caches (MV_TREE_PORTS), so their serial windows keep their caches from window to window."""
    from mvopt.bench import rail_allreduce_spec
    from mvopt.build import build_experiment
    from mvopt.config import load_config

    return build_experiment(load_config(rail_allreduce_spec(size, servers, name=f"rail{servers}-{cc}-{lb}", cc=cc,
                                                            lb=lb)))
