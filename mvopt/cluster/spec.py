"""The uncompiled network: nodes and links, and the wiring primitives every builder shares.

A builder describes its topology as a :class:`NetworkSpec` (hosts, switches with their tier, an
undirected link list with integer rate and delay); :func:`mvopt.cluster.compile.compile_network`
turns it into the engine's arrays. :class:`SpecBuilder` holds the wiring operations the builders
have in common (attach hosts, connect two switch layers completely, connect given pairs), each
vectorised and each taking the link rate and delay of the link's tier from the cluster config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from mvopt._cfg.cluster import TOPOLOGY_FIELDS
from mvopt.cluster.units import gbps_to_bps, ns_to_ps
from mvopt.errors import ConfigError
from mvopt.sizes import check_size

# Lower bounds of what a node and a link cost once built and compiled (ids, tiers, ports with
# their peer, rate and delay): enough to refuse a topology far too large before building it.
NODE_BYTES = 64
LINK_BYTES = 128

__all__ = ["NetworkSpec", "SpecBuilder", "tier_link_params", "config_parameters"]


@dataclass
class NetworkSpec:
    """Hosts ``0..n_host-1`` and switches ``n_host..``; one row per undirected link."""

    kind: str
    parameters: dict[str, Any]
    n_host: int
    switch_tier: np.ndarray          # int8[n_switch], 1 = switches the hosts attach to
    link_a: np.ndarray               # int32[n_link] node id
    link_b: np.ndarray               # int32[n_link] node id
    link_rate_bps: np.ndarray        # int64[n_link]
    link_delay_ps: np.ndarray        # int64[n_link]
    link_tier: np.ndarray            # int8[n_link], 0 = host links
    nics_per_server: int = 1
    gpus_per_server: int = 1

    @property
    def n_switch(self) -> int:
        return int(self.switch_tier.size)


def tier_link_params(cluster: Any) -> Callable[[int], tuple[int, int]]:
    """``f(tier) -> (rate_bps, delay_ps)`` from ``cluster.link_gbps`` / ``link_delay_ns``, exact.

    Raises ConfigError when a value is not a whole number of bits/s or picoseconds.
    """
    def params(tier: int) -> tuple[int, int]:
        gbps, ns = cluster.tier_gbps(tier), cluster.tier_delay_ns(tier)
        rate, delay = gbps_to_bps(gbps), ns_to_ps(ns)
        if rate is None:
            raise ConfigError("cluster.link_gbps", "every rate must be a whole number of bits/s",
                              list(cluster.link_gbps))
        if delay is None:
            raise ConfigError("cluster.link_delay_ns", "every delay must be a whole number of "
                              "picoseconds", list(cluster.link_delay_ns))
        return rate, delay
    return params


def config_parameters(cluster: Any) -> dict[str, Any]:
    """The cluster fields a topology was built from (unset fields left out), JSON-ready."""
    other = {f for fs in TOPOLOGY_FIELDS.values() for f in fs} - set(TOPOLOGY_FIELDS[cluster.topology])
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cluster):
        value = getattr(cluster, f.name)
        if value is None or f.name == "gpu" or f.name in other:
            continue
        out[f.name] = list(value) if isinstance(value, (tuple, list)) else value
    out["nics_per_server"] = cluster.resolved_nics_per_server
    return out


@dataclass
class SpecBuilder:
    """Accumulates switches and links for one topology.

    Switch handles returned by :meth:`add_switches` are node ids (hosts come first, so the number
    of hosts is fixed up front). ``link_params(tier)`` gives a link's rate and delay.
    """

    n_host: int
    link_params: Callable[[int], tuple[int, int]]
    _tiers: list[np.ndarray] = field(default_factory=list)
    _n_switch: int = 0
    _links: list[tuple[np.ndarray, np.ndarray, int]] = field(default_factory=list)
    _n_link: int = 0
    where: str = "cluster"     # the configuration that sized it, for the error message

    def __post_init__(self) -> None:
        check_size("its hosts", self.n_host, NODE_BYTES, self.where)

    def add_switches(self, count: int, tier: int) -> np.ndarray:
        """``count`` new switches of ``tier``; returns their node ids (int64)."""
        check_size("its nodes", self.n_host + self._n_switch + count, NODE_BYTES, self.where)
        ids = self.n_host + self._n_switch + np.arange(count, dtype=np.int64)
        self._tiers.append(np.full(count, tier, np.int8))
        self._n_switch += count
        return ids

    def connect(self, a: np.ndarray, b: np.ndarray, tier: int) -> None:
        """One link between ``a[i]`` and ``b[i]`` for every i (arrays broadcast)."""
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        self._n_link += a.size
        check_size("its links", self._n_link, LINK_BYTES, self.where)
        if a.size:
            self._links.append((a.ravel(), b.ravel(), tier))

    def attach_hosts(self, switch_of_host: np.ndarray) -> None:
        """Host h gets its single (tier-0) link to switch ``switch_of_host[h]``."""
        assert switch_of_host.size == self.n_host
        self.connect(np.arange(self.n_host), switch_of_host, 0)

    def connect_complete(self, lower: np.ndarray, upper: np.ndarray, tier: int) -> None:
        """Complete bipartite wiring: every switch of ``lower`` gets one link to every switch of
        ``upper``. With 2-D arrays ``(blocks, m)`` and ``(blocks, n)`` this is done block by block
        (e.g. edge and aggregation switches of each pod). Links are created lower-major, so a
        lower switch's uplinks are numbered in the order of ``upper``."""
        lower, upper = np.asarray(lower, np.int64), np.asarray(upper, np.int64)
        self.connect(lower[..., :, None], upper[..., None, :], tier)

    def build(self, kind: str, parameters: dict[str, Any], *, nics_per_server: int,
              gpus_per_server: int) -> NetworkSpec:
        """The finished :class:`NetworkSpec`."""
        a = np.concatenate([x for x, _, _ in self._links]) if self._links else np.zeros(0, np.int64)
        b = np.concatenate([y for _, y, _ in self._links]) if self._links else np.zeros(0, np.int64)
        tiers = np.concatenate([np.full(x.size, t, np.int8) for x, _, t in self._links]) \
            if self._links else np.zeros(0, np.int8)
        rate = np.zeros(a.size, np.int64)
        delay = np.zeros(a.size, np.int64)
        for t in np.unique(tiers):
            rate[tiers == t], delay[tiers == t] = self.link_params(int(t))
        return NetworkSpec(kind=kind, parameters=parameters, n_host=self.n_host,
                           switch_tier=np.concatenate(self._tiers) if self._tiers else np.zeros(0, np.int8),
                           link_a=a.astype(np.int32), link_b=b.astype(np.int32), link_rate_bps=rate,
                           link_delay_ps=delay, link_tier=tiers,
                           nics_per_server=nics_per_server, gpus_per_server=gpus_per_server)
