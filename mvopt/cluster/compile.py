"""From a :class:`~mvopt.cluster.spec.NetworkSpec` to a validated :class:`CompiledTopology`."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mvopt.cluster.compiled import CompiledTopology
from mvopt.cluster.faults import LinkFaults, apply_faults, down_links
from mvopt.cluster.ports import make_ports
from mvopt.cluster.routing import bfs_distances, compute_routes
from mvopt.cluster.spec import NetworkSpec
from mvopt.errors import ConfigError, InputFileError

__all__ = ["compile_network", "validate_spec", "hop_layers", "SpecError"]


class SpecError(Exception):
    """A network that breaks a structural rule; ``link`` is the offending link's index or None."""

    def __init__(self, message: str, link: int | None = None) -> None:
        super().__init__(message)
        self.link = link


def validate_spec(spec: NetworkSpec) -> None:
    """Check the rules every network must follow; raises :class:`SpecError`.

    At least one host and one switch; link ends are existing nodes, never the same node; every
    host has exactly one link, to a switch; rates > 0, delays >= 0; the graph is connected.
    """
    n_host, n_node = spec.n_host, spec.n_host + spec.n_switch
    a, b = spec.link_a.astype(np.int64), spec.link_b.astype(np.int64)
    if n_host < 1:
        raise SpecError("no hosts")
    if spec.n_switch < 1:
        raise SpecError("no switches")
    bad = np.flatnonzero((a < 0) | (a >= n_node) | (b < 0) | (b >= n_node))
    if bad.size:
        raise SpecError(f"unknown node id (nodes are 0..{n_node - 1})", int(bad[0]))
    bad = np.flatnonzero(a == b)
    if bad.size:
        raise SpecError(f"link from node {a[bad[0]]} to itself", int(bad[0]))
    bad = np.flatnonzero((a < n_host) & (b < n_host))
    if bad.size:
        raise SpecError(f"link between two hosts ({a[bad[0]]} and {b[bad[0]]})", int(bad[0]))
    bad = np.flatnonzero(spec.link_rate_bps <= 0)
    if bad.size:
        raise SpecError("link rate must be > 0", int(bad[0]))
    bad = np.flatnonzero(spec.link_delay_ps < 0)
    if bad.size:
        raise SpecError("negative delay", int(bad[0]))
    ends = np.concatenate([a, b])
    host_links = np.bincount(ends[ends < n_host], minlength=n_host)
    if (host_links != 1).any():
        h = int(np.flatnonzero(host_links != 1)[0])
        second = np.flatnonzero((a == h) | (b == h))
        raise SpecError(f"host {h} has {host_links[h]} links (a host has exactly one, to a switch)",
                        int(second[1]) if second.size > 1 else None)
    offset = np.zeros(n_node + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=n_node), out=offset[1:])
    adj = np.concatenate([b, a])[np.argsort(ends, kind="stable")]
    dist = bfs_distances(np.array([n_host]), offset, adj, n_node)[0]
    cut = np.flatnonzero(dist < 0)
    if cut.size:
        raise SpecError(f"the network is disconnected: {cut.size} of {n_node} nodes (e.g. node "
                        f"{cut[0]}) cannot be reached from node {n_host}")


def hop_layers(n_host: int, n_node: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tiers for networks given as a bare graph (files, networkx): a switch's tier is its hop
    distance from the nearest host (1 = hosts attach to it), a link's tier the smaller tier of its
    ends (0 = host link). Unreachable switches get tier 1 (validation rejects them later).

    Returns ``(switch_tier int8[n_switch], link_tier int8[n_link])``.
    """
    a, b = a.astype(np.int64), b.astype(np.int64)
    ends = np.concatenate([a, b, np.full(n_host, n_node), np.arange(n_host)])
    other = np.concatenate([b, a, np.arange(n_host), np.full(n_host, n_node)])
    offset = np.zeros(n_node + 2, np.int64)
    np.cumsum(np.bincount(ends, minlength=n_node + 1), out=offset[1:])
    adj = other[np.argsort(ends, kind="stable")]
    dist = bfs_distances(np.array([n_node]), offset, adj, n_node + 1)[0][:n_node] - 1
    tier = np.where(dist < 0, 1, dist)
    tier[:n_host] = 0
    return tier[n_host:].astype(np.int8), np.minimum(tier[a], tier[b]).astype(np.int8)


def compile_network(spec: NetworkSpec, *, source: str = "<topology>",
                    link_lines: Sequence[int] | None = None, faults: LinkFaults | None = None) -> CompiledTopology:
    """Validate ``spec``, apply ``faults``, number its ports, compute routing and the server/GPU maps
    (links going down during the run keep their ports and are listed in ``link_down``).

    Structural problems raise InputFileError naming ``source`` (and the line of the offending
    link when ``link_lines`` maps link indices to line numbers). Faults that name no existing
    link or host, or failed links that disconnect the network, raise ConfigError.
    """
    try:
        validate_spec(spec)
    except SpecError as e:
        line = link_lines[e.link] if (link_lines is not None and e.link is not None) else None
        raise InputFileError(source, line, str(e)) from None
    down: list[int] = []
    if faults and faults.down:
        down, rest = down_links(spec, faults)
        try:
            validate_spec(rest)
        except SpecError as e:
            raise ConfigError("cluster.link_down", f"leave the network without a path between some nodes once "
                              f"they are all down ({e})", [[t, i, at / 1000] for t, i, at in faults.down]) from None
    if faults:
        spec = apply_faults(spec, faults)
        try:
            validate_spec(spec)
        except SpecError as e:
            raise ConfigError("cluster.failed_links", f"leave the network without a path between some "
                              f"nodes ({e})", [list(x) for x in faults.failed]) from None
    n_host, nics, gpus = spec.n_host, spec.nics_per_server, spec.gpus_per_server
    if n_host % nics:
        raise ConfigError("cluster.nics_per_server", f"must divide the number of hosts ({n_host})", nics)
    n_node = n_host + spec.n_switch
    ports = make_ports(n_node, spec.link_a, spec.link_b, spec.link_rate_bps, spec.link_delay_ps, spec.link_tier)
    routes = compute_routes(n_host, ports.node_port_offset, ports.port_node, ports.port_peer_node,
                            ports.port_peer_port)
    # each link going down: its two ports (one per direction), by time (stable: as listed)
    link_down = tuple(sorted(((at, *(int(q) for q in np.flatnonzero(ports.port_link == link)))
                              for link, (_, _, at) in zip(down, faults.down)), key=lambda d: d[0])) if down else ()
    n_server = n_host // nics
    gpu = np.arange(n_server * gpus, dtype=np.int64)
    return CompiledTopology(
        kind=spec.kind, parameters=spec.parameters, n_host=n_host,
        node_tier=np.concatenate([np.zeros(n_host, np.int8), spec.switch_tier]),
        node_port_offset=ports.node_port_offset, port_node=ports.port_node,
        port_peer_node=ports.port_peer_node, port_peer_port=ports.port_peer_port,
        port_rate_bps=ports.port_rate_bps, port_delay_ps=ports.port_delay_ps, port_tier=ports.port_tier,
        sw_route_offset=routes.sw_route_offset, route_dst_lo=routes.route_dst_lo,
        route_nhset=routes.route_nhset, nhset_offset=routes.nhset_offset, nhset_port=routes.nhset_port,
        host_server=np.arange(n_host) // nics,
        gpu_host=(gpu // gpus) * nics + (gpu % gpus) * nics // gpus,
        n_server=n_server, gpus_per_server=gpus, diameter_hops=routes.diameter_hops, link_down=link_down,
    )
