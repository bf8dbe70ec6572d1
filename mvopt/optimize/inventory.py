"""Hardware counts of a cluster configuration, from the topology builders of :mod:`mvopt.cluster`.

The builders' link lists (no routing, no compilation) give exact counts for the names a search
space can use (``gpus``, ``servers``, ``hosts``, ``switches``...) and for the cluster-cost
objective; an invalid topology raises the builder's own ConfigError. Results are cached per
cluster section. For ``topology: file`` the counts come from the file's header line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from mvopt.config import ClusterConfig, ExperimentConfig
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


def inventory(cfg: ExperimentConfig) -> Inventory:
    """Counts of servers, GPUs, NICs, switches, links and switch ports of ``cfg.cluster``."""
    if cfg.cluster.topology == "file":
        return _file_inventory(cfg.cluster, cfg.resolve_path(cfg.cluster.topology_file or ""))
    key = repr(cfg.cluster)
    inv = _CACHE.get(key)
    if inv is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        inv = _CACHE[key] = _built_inventory(cfg.cluster)
    return inv


_CACHE: dict[str, Inventory] = {}


def _servers(c: ClusterConfig, hosts: int) -> int:
    return max(1, hosts // c.resolved_nics_per_server)


def _built_inventory(c: ClusterConfig) -> Inventory:
    from mvopt.cluster.build import BUILDERS  # the builders own the wiring rules
    spec = BUILDERS[c.topology](c)
    gbps = spec.link_rate_bps.astype(np.float64) / 1e9
    ends = (spec.link_a >= spec.n_host).astype(np.int64) + (spec.link_b >= spec.n_host)
    links: dict[float, int] = {}
    ports: dict[float, int] = {}
    for rate in np.unique(gbps):
        sel = gbps == rate
        links[float(rate)] = int(sel.sum())
        ports[float(rate)] = int(ends[sel].sum())
    servers = _servers(c, spec.n_host)
    return Inventory(servers=servers, gpus=servers * c.gpus_per_server, hosts=spec.n_host, switches=spec.n_switch,
                     links_by_gbps=links, ports_by_gbps=ports, nic_gbps=c.tier_gbps(0))


def _file_inventory(c: ClusterConfig, path: str) -> Inventory:
    try:
        with open(path) as f:
            nodes, switches, n_links = (int(x) for x in f.readline().split()[:3])
    except (OSError, ValueError) as e:
        raise ConfigError("cluster.topology_file", f"cannot read its header line ({e})", os.fspath(path)) from None
    hosts = nodes - switches
    rate = c.tier_gbps(0)
    servers = _servers(c, hosts)
    return Inventory(servers=servers, gpus=servers * c.gpus_per_server, hosts=hosts, switches=switches,
                     links_by_gbps={rate: n_links}, ports_by_gbps={rate: 2 * n_links - hosts}, nic_gbps=rate)
