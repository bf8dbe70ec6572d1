"""Failures and degradations applied to a network before it is compiled.

A link is named by its tier and its index among the links of that tier, in the order the builder
creates them (docs/topologies.md gives the order of every topology; for ``topology: file``, the
order of the file). A failed link is removed for the whole iteration and routing is recomputed on
what remains, so traffic moves to the remaining shortest paths. A degraded link or a slow NIC
keeps its place and runs at its rate times a factor. ``nic_efficiency`` scales every host link
(the fraction of line rate NCCL reaches between servers), before any slow NIC's own factor. A
link going down at a time keeps its ports; the compiled topology lists it
(``CompiledTopology.link_down``) and the engine routes around it from then on (docs/engine.md,
"Links going down").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from mvopt.cluster.spec import NetworkSpec
from mvopt.cluster.units import exact
from mvopt.errors import ConfigError

__all__ = ["LinkFaults", "link_faults", "apply_faults", "down_links"]


@dataclass(frozen=True)
class LinkFaults:
    """``failed``: (tier, index); ``degraded``: (tier, index, rate factor); ``slow_nics``: (host, rate
    factor); ``nic_efficiency``: factor of every host link (None: line rate); ``down``: (tier, index,
    time in ps) of links going down during the run."""

    failed: tuple[tuple[int, int], ...] = ()
    degraded: tuple[tuple[int, int, float], ...] = ()
    slow_nics: tuple[tuple[int, float], ...] = ()
    nic_efficiency: float | None = None
    down: tuple[tuple[int, int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.failed or self.degraded or self.slow_nics or self.nic_efficiency is not None or self.down)


def link_faults(cluster: Any) -> LinkFaults:
    """The faults a ClusterConfig lists (entries already checked for shape by the config)."""
    return LinkFaults(
        failed=tuple((int(t), int(i)) for t, i in cluster.failed_links),
        degraded=tuple((int(t), int(i), float(f)) for t, i, f in cluster.degraded_links),
        slow_nics=tuple((int(h), float(f)) for h, f in cluster.slow_nics),
        nic_efficiency=None if cluster.nic_efficiency is None else float(cluster.nic_efficiency),
        down=tuple((int(t), int(i), int(round(float(at) * 1000))) for t, i, at in getattr(cluster, "link_down", ())))


def _link_of(spec: NetworkSpec, field: str, tier: int, index: int) -> int:
    links = np.flatnonzero(spec.link_tier == tier)
    if not 0 <= index < links.size:
        tiers = sorted(int(t) for t in np.unique(spec.link_tier))
        have = f"tier {tier} has {links.size} links (indices 0..{links.size - 1})" if links.size \
            else f"the topology has links of tiers {tiers} only"
        raise ConfigError(field, f"names link {index} of tier {tier}, which does not exist: {have}",
                          [tier, index])
    return int(links[index])


def _scaled(rate_bps: int, factor: float, field: str, value: Any) -> int:
    rate = exact(rate_bps) * exact(factor)
    if rate.denominator != 1:
        raise ConfigError(field, f"must scale the link's {rate_bps} bit/s to a whole number of bits/s "
                          f"(here {float(rate):.6g})", value)
    return int(rate)


def apply_faults(spec: NetworkSpec, faults: LinkFaults, where: str = "cluster") -> NetworkSpec:
    """``spec`` with degraded and slow-NIC rates scaled and failed links removed.

    A reference to a link or host that does not exist, or a failed host link, raises ConfigError
    naming the field under ``where``; :func:`mvopt.cluster.compile.compile_network` refuses
    failures that cut the network in two.
    """
    if not (faults.failed or faults.degraded or faults.slow_nics or faults.nic_efficiency is not None):
        return spec
    rate = spec.link_rate_bps.copy()
    if faults.nic_efficiency is not None:
        for link in np.flatnonzero(spec.link_tier == 0):
            rate[link] = _scaled(int(rate[link]), faults.nic_efficiency, f"{where}.nic_efficiency",
                                 faults.nic_efficiency)
    for i, (tier, index, factor) in enumerate(faults.degraded):
        field = f"{where}.degraded_links[{i}]"
        link = _link_of(spec, field, tier, index)
        rate[link] = _scaled(int(rate[link]), factor, field, [tier, index, factor])
    a, b = spec.link_a.astype(np.int64), spec.link_b.astype(np.int64)
    for i, (host, factor) in enumerate(faults.slow_nics):
        field = f"{where}.slow_nics[{i}]"
        if not 0 <= host < spec.n_host:
            raise ConfigError(field, f"names host {host}, which does not exist (hosts are 0..{spec.n_host - 1})",
                              [host, factor])
        link = int(np.flatnonzero((a == host) | (b == host))[0])
        rate[link] = _scaled(int(rate[link]), factor, field, [host, factor])
    keep = np.ones(a.size, bool)
    for i, (tier, index) in enumerate(faults.failed):
        field = f"{where}.failed_links[{i}]"
        if tier == 0:
            raise ConfigError(field, "names a host link (tier 0): a host has one link, so failing it "
                              "disconnects the host; use slow_nics for a slow NIC", [tier, index])
        keep[_link_of(spec, field, tier, index)] = False
    return dataclasses.replace(spec, link_a=spec.link_a[keep], link_b=spec.link_b[keep],
                               link_rate_bps=rate[keep], link_delay_ps=spec.link_delay_ps[keep],
                               link_tier=spec.link_tier[keep])


def down_links(spec: NetworkSpec, faults: LinkFaults, where: str = "cluster") -> tuple[list[int], NetworkSpec]:
    """The links of ``faults.down`` as indices into ``apply_faults(spec, faults)``'s links, in the
    order listed, and that network without them (to check it stays connected). A link that does
    not exist, or that is also in ``failed_links``, raises ConfigError naming ``where.link_down[i]``."""
    failed = sorted({_link_of(spec, f"{where}.failed_links[{i}]", t, x) for i, (t, x) in enumerate(faults.failed)})
    out = []
    for i, (tier, index, at_ps) in enumerate(faults.down):
        field = f"{where}.link_down[{i}]"
        link = _link_of(spec, field, tier, index)
        if link in failed:
            raise ConfigError(field, "names a link that failed_links removes for the whole run", [tier, index, at_ps / 1000])
        out.append(link - int(np.searchsorted(failed, link)))
    kept = apply_faults(spec, dataclasses.replace(faults, down=()), where)
    keep = np.ones(kept.link_a.size, bool)
    keep[out] = False
    rest = dataclasses.replace(kept, link_a=kept.link_a[keep], link_b=kept.link_b[keep],
                               link_rate_bps=kept.link_rate_bps[keep], link_delay_ps=kept.link_delay_ps[keep],
                               link_tier=kept.link_tier[keep])
    return out, rest
