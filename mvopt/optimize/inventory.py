"""Closed-form hardware counts of a cluster configuration, without building the topology.

Used for the names a search space can refer to (``gpus``, ``servers``, ``hosts``...) and for the
cluster-cost objective. The counts follow the topology definitions of :mod:`mvopt._cfg.cluster`;
oversubscribed tiers get ``round(down_bandwidth / (oversubscription * up_rate))`` uplinks per
switch (at least one). This is an estimate for pricing and sizing, not the routed topology.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mvopt.config import ExperimentConfig
from mvopt.errors import ConfigError

__all__ = ["Inventory", "inventory"]


@dataclass(frozen=True)
class Inventory:
    """Hardware of one cluster.

    ``links_by_gbps`` counts every cable (host links included) by its rate; ``ports_by_gbps``
    counts switch ports only (a NIC is not a switch port).
    """

    servers: int
    gpus: int
    hosts: int  # network endpoints (NICs)
    switches: int
    links_by_gbps: dict[float, int] = field(default_factory=dict)
    ports_by_gbps: dict[float, int] = field(default_factory=dict)
    nic_gbps: float = 0.0

    @property
    def links(self) -> int:
        return sum(self.links_by_gbps.values())

    @property
    def switch_ports(self) -> int:
        return sum(self.ports_by_gbps.values())

    def names(self) -> dict[str, float]:
        """The counts as expression names (``gpus``, ``servers``, ``hosts``, ``switches``...)."""
        return {"servers": self.servers, "gpus": self.gpus, "hosts": self.hosts, "nics": self.hosts,
                "switches": self.switches, "links": self.links, "switch_ports": self.switch_ports}


class _Builder:
    def __init__(self, cfg: ExperimentConfig) -> None:
        self.c = cfg.cluster
        self.switches = 0
        self.links: dict[float, int] = {}
        self.ports: dict[float, int] = {}

    def tier(self, tier: int, count: int, switch_ends: int) -> None:
        rate = self.c.tier_gbps(tier)
        self.links[rate] = self.links.get(rate, 0) + count
        self.ports[rate] = self.ports.get(rate, 0) + count * switch_ends

    def uplinks(self, down: int, tier_down: int, tier_up: int) -> int:
        bw = down * self.c.tier_gbps(tier_down) / (self.c.oversubscription * self.c.tier_gbps(tier_up))
        return max(1, round(bw))


def inventory(cfg: ExperimentConfig) -> Inventory:
    """Counts of servers, GPUs, NICs, switches, links and switch ports of ``cfg.cluster``."""
    c = cfg.cluster
    b = _Builder(cfg)
    nics = c.resolved_nics_per_server
    topo = c.topology
    if topo == "fat_tree":
        k = c.k
        hosts = k ** 3 // 4
        b.switches = 5 * k * k // 4
        b.tier(0, hosts, 1)
        b.tier(1, k ** 3 // 4, 2)
        b.tier(2, k ** 3 // 4, 2)
    elif topo == "leaf_spine":
        hosts = c.leaves * c.hosts_per_leaf
        up = b.uplinks(c.hosts_per_leaf, 0, 1)
        b.switches = c.leaves + up
        b.tier(0, hosts, 1)
        b.tier(1, c.leaves * up, 2)
    elif topo == "rail_optimized":
        hosts = c.servers * nics
        leaves = (c.servers // c.servers_per_group) * nics
        up = b.uplinks(c.servers_per_group, 0, 1)
        b.tier(0, hosts, 1)
        if c.tiers == 2:
            b.switches = leaves + up
            b.tier(1, leaves * up, 2)
        else:
            pods = max(1, math.ceil(c.servers // c.servers_per_group / c.groups_per_pod))
            spines = pods * up
            core = max(1, math.ceil(leaves * up / max(1, spines)))
            b.switches = leaves + spines + core
            b.tier(1, leaves * up, 2)
            b.tier(2, spines * core, 2)
    elif topo == "torus":
        servers = math.prod(c.torus_dims)
        hosts = servers * nics
        b.switches = servers
        b.tier(0, hosts, 1)
        b.tier(1, sum(servers if d > 2 else servers // 2 for d in c.torus_dims), 2)
    elif topo == "dragonfly":
        g, a, p = c.groups, c.routers_per_group, c.hosts_per_router
        h = c.global_links_per_router or math.ceil((g - 1) / a)
        hosts = g * a * p
        b.switches = g * a
        b.tier(0, hosts, 1)
        b.tier(1, g * a * (a - 1) // 2, 2)
        b.tier(2, g * a * h // 2, 2)
    elif topo == "file":
        hosts, b.switches, links = _file_counts(cfg)
        b.tier(0, hosts, 1)
        b.tier(1, max(0, links - hosts), 2)
    else:  # pragma: no cover - the config schema lists every topology
        raise ConfigError("cluster.topology", "has no inventory model", topo)
    servers = c.servers if topo == "rail_optimized" else max(1, hosts // nics)
    return Inventory(servers=servers, gpus=servers * c.gpus_per_server, hosts=hosts, switches=b.switches,
                     links_by_gbps=b.links, ports_by_gbps=b.ports, nic_gbps=c.tier_gbps(0))


def _file_counts(cfg: ExperimentConfig) -> tuple[int, int, int]:
    path = cfg.resolve_path(cfg.cluster.topology_file or "")
    try:
        with open(path) as f:
            nodes, switches, links = (int(x) for x in f.readline().split()[:3])
    except (OSError, ValueError) as e:
        raise ConfigError("cluster.topology_file", f"cannot read its header line ({e})", path) from None
    return nodes - switches, switches, links
