"""The ``cluster`` section: topology kind and parameters, servers, GPUs, NICs, links per tier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from mvopt._cfg.base import Section, at_least, each, field, positive
from mvopt.errors import ConfigError

MAX_LINK_DOWN = 4   # links that may go down during one run (the engine keeps them in its experiment table)
TOPOLOGIES = ("fat_tree", "leaf_spine", "rail_optimized", "torus", "dragonfly", "file")

# Which topology-specific fields each topology accepts (all others must stay unset).
TOPOLOGY_FIELDS: dict[str, tuple[str, ...]] = {
    "fat_tree": ("k",),
    "leaf_spine": ("leaves", "hosts_per_leaf", "oversubscription"),
    "rail_optimized": ("servers", "servers_per_group", "oversubscription", "tiers", "groups_per_pod"),
    "torus": ("torus_dims",),
    "dragonfly": ("groups", "routers_per_group", "hosts_per_router", "global_links_per_router"),
    "file": ("topology_file",),
}
_SPECIFIC = sorted({f for fs in TOPOLOGY_FIELDS.values() for f in fs})
_REQUIRED: dict[str, tuple[str, ...]] = {
    "fat_tree": ("k",),
    "leaf_spine": ("leaves", "hosts_per_leaf"),
    "rail_optimized": ("servers", "servers_per_group"),
    "torus": ("torus_dims",),
    "dragonfly": ("groups", "routers_per_group", "hosts_per_router"),
    "file": ("topology_file",),
}


def _even_k(v: int) -> str | None:
    return None if v >= 2 and v % 2 == 0 else "must be an even integer >= 2"


@dataclass(frozen=True)
class ClusterConfig(Section):
    """Hardware: the network topology and what hangs off it.

    Every network endpoint is one NIC ("host" in the network); a server has ``nics_per_server``
    of them and ``gpus_per_server`` GPUs, GPU g using NIC ``g * nics // gpus``. Link tiers count
    from the hosts: tier 0 = NIC-to-first-switch links, tier 1 = the next switch layer up, etc.
    """

    topology: Literal["fat_tree", "leaf_spine", "rail_optimized", "torus", "dragonfly", "file"] = field(
        "fat_tree", doc="topology kind")
    # --- fat_tree
    k: Optional[int] = field(None, doc="fat_tree: switch radix k (k^3/4 hosts, 5k^2/4 switches)",
                             check=_even_k)
    # --- leaf_spine
    leaves: Optional[int] = field(None, doc="leaf_spine: number of leaf switches", check=positive)
    hosts_per_leaf: Optional[int] = field(None, doc="leaf_spine: NICs attached to each leaf", check=positive)
    oversubscription: float = field(
        1.0, doc="leaf_spine / rail_optimized: leaf downlink bandwidth over uplink bandwidth "
                 "(1 = non-blocking); the number of uplinks (spines) follows and must be an integer",
        check=at_least(1.0))
    # --- rail_optimized
    servers: Optional[int] = field(None, doc="rail_optimized: number of servers", check=positive)
    servers_per_group: Optional[int] = field(
        None, doc="rail_optimized: servers per rail group (each rail leaf connects NIC i of every "
                  "server of its group)", check=positive)
    tiers: int = field(2, doc="rail_optimized: 2 (rail leaves + spines) or 3 (+ core tier over pods)",
                       check=lambda v: None if v in (2, 3) else "must be 2 or 3")
    groups_per_pod: Optional[int] = field(None, doc="rail_optimized with tiers=3: rail groups per pod",
                                          check=positive)
    # --- torus
    torus_dims: Optional[list[int]] = field(
        None, doc="torus: size of each dimension (2 or 3 dimensions); one router per server, "
                  "wrap-around links", check=lambda v: None if len(v) in (2, 3) and all(d >= 2 for d in v)
        else "must list 2 or 3 dimensions, each >= 2")
    # --- dragonfly
    groups: Optional[int] = field(None, doc="dragonfly: number of groups", check=at_least(2))
    routers_per_group: Optional[int] = field(None, doc="dragonfly: routers per group (all-to-all inside)",
                                             check=positive)
    hosts_per_router: Optional[int] = field(None, doc="dragonfly: NICs per router", check=positive)
    global_links_per_router: Optional[int] = field(
        None, doc="dragonfly: global links per router", default_doc="just enough for one link "
        "between every pair of groups", check=positive)
    # --- file
    topology_file: Optional[str] = field(
        None, doc="file: path of a topology in the HPCC/ns-3 text format (relative to the config file)")
    # --- common
    gpus_per_server: int = field(8, doc="GPUs per server", check=positive)
    nics_per_server: Optional[int] = field(
        None, doc="NICs (network endpoints) per server; rail_optimized: gpus_per_server, or 1 to build rail 0 "
        "alone (its leaves and NICs, with the whole fabric's spines and cores) for workload.rail_sample",
        default_doc="gpus_per_server for rail_optimized, else 1", check=positive)
    gpu: str = field("H100", doc="GPU type (a name from the GPU table, or a user-defined GPU)")
    link_gbps: list[float] = field([100.0, 100.0, 100.0], unit="Gb/s",
                                   doc="link rate per tier (tier 0 = host links); the last value "
                                       "repeats for higher tiers", check=each(positive))
    link_delay_ns: list[float] = field([1000.0, 1000.0, 1000.0], unit="ns",
                                       doc="propagation delay per tier; the last value repeats",
                                       check=lambda v: None if all(x >= 0 for x in v) and len(v) > 0
                                       else "must be a non-empty list of delays >= 0")
    nic_efficiency: Optional[float] = field(
        None, doc="fraction of the NIC line rate that NCCL's transfers between servers reach (0 < x <= 1): "
        "every host link runs at this times its rate; fit it from an nccl-tests all-gather across two "
        "servers (docs/training-model.md, section *Inter-server efficiency*)",
        default_doc="1 (line rate)",
        check=lambda v: None if 0 < v <= 1 else "must be a fraction of the line rate: 0 < x <= 1")
    # --- failures and degradations (docs/topologies.md, section *Failures and degraded links*)
    failed_links: list[list[int]] = field(
        [], doc="links down for the whole iteration, each [tier, index] (index among the links of that "
        "tier, in the topology's order); routing is recomputed over the remaining shortest paths",
        check=lambda v: None if all(len(x) == 2 and x[0] >= 1 and x[1] >= 0 for x in v)
        else "must list [tier, index] pairs with tier >= 1 (a host link cannot fail: use slow_nics) and index >= 0")
    link_down: list[list[float]] = field(
        [], doc="links going down during the run, each [tier, index, at_ns] (tier and index as in "
        "failed_links): from at_ns the link carries nothing, a packet reaching its far end then is lost, "
        f"and switches route over the shortest paths of what remains (docs/engine.md, \"Links going down\"; "
        f"packet level only, at most {MAX_LINK_DOWN})",
        check=lambda v: None if len(v) <= MAX_LINK_DOWN and all(len(x) == 3 and x[0] >= 1 and x[1] >= 0 and x[2] >= 0
                                                    and float(x[0]).is_integer() and float(x[1]).is_integer()
                                                    for x in v)
        else f"must list at most {MAX_LINK_DOWN} [tier, index, at_ns] triples: whole tier >= 1 (a host link cannot fail), "
        "whole index >= 0, at_ns >= 0")
    degraded_links: list[list[float]] = field(
        [], doc="links running slower, each [tier, index, rate_factor] (0 < rate_factor <= 1 scales the "
        "link's rate, both directions)",
        check=lambda v: None if all(len(x) == 3 and x[0] >= 0 and x[1] >= 0 and float(x[0]).is_integer()
                                    and float(x[1]).is_integer() and 0 < x[2] <= 1 for x in v)
        else "must list [tier, index, rate_factor] triples: whole tier and index >= 0, 0 < rate_factor <= 1")
    slow_nics: list[list[float]] = field(
        [], doc="slow NICs, each [host, rate_factor]: the host's link runs at rate_factor x its rate "
        "(0 < rate_factor <= 1)",
        check=lambda v: None if all(len(x) == 2 and x[0] >= 0 and float(x[0]).is_integer() and 0 < x[1] <= 1
                                    for x in v)
        else "must list [host, rate_factor] pairs: whole host id >= 0, 0 < rate_factor <= 1")

    def _check(self, path: str) -> None:
        topo = self.topology
        allowed = TOPOLOGY_FIELDS[topo]
        defaults = {"oversubscription": 1.0, "tiers": 2}
        for name in _SPECIFIC:
            if name in allowed:
                continue
            value = getattr(self, name)
            if value is not None and value != defaults.get(name):
                raise ConfigError(f"{path}.{name}",
                                  f"is not a parameter of topology {topo!r} (its parameters: "
                                  f"{', '.join(allowed)})", value)
        for name in _REQUIRED[topo]:
            if getattr(self, name) is None:
                raise ConfigError(f"{path}.{name}", f"is required for topology {topo!r}", show_value=False)
        if not self.link_gbps:
            raise ConfigError(f"{path}.link_gbps", "must list at least one rate", list(self.link_gbps))
        if topo == "rail_optimized":
            nics = self.resolved_nics_per_server
            if nics not in (self.gpus_per_server, 1):
                raise ConfigError(f"{path}.nics_per_server", "must equal gpus_per_server for "
                                  f"rail_optimized ({self.gpus_per_server}), or be 1 to describe rail 0 "
                                  "alone (for workload.rail_sample)", nics)
            if self.tiers == 3 and self.groups_per_pod is None:
                raise ConfigError(f"{path}.groups_per_pod", "is required when tiers = 3", show_value=False)
            if self.servers % self.servers_per_group:
                raise ConfigError(f"{path}.servers", f"must be a multiple of servers_per_group "
                                  f"({self.servers_per_group})", self.servers)
        if self.nics_per_server is not None and self.gpus_per_server % self.nics_per_server \
                and self.nics_per_server % self.gpus_per_server:
            raise ConfigError(f"{path}.nics_per_server", "must divide gpus_per_server or be a "
                              f"multiple of it ({self.gpus_per_server})", self.nics_per_server)

    @property
    def resolved_nics_per_server(self) -> int:
        if self.nics_per_server is not None:
            return self.nics_per_server
        return self.gpus_per_server if self.topology == "rail_optimized" else 1

    def tier_gbps(self, tier: int) -> float:
        return float(self.link_gbps[min(tier, len(self.link_gbps) - 1)])

    def tier_delay_ns(self, tier: int) -> float:
        return float(self.link_delay_ns[min(tier, len(self.link_delay_ns) - 1)])
