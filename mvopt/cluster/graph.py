"""Build a compiled topology from any networkx graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from mvopt.cluster.compile import compile_network, hop_layers
from mvopt.cluster.compiled import CompiledTopology
from mvopt.cluster.spec import NetworkSpec
from mvopt.cluster.units import gbps_to_bps, ns_to_ps
from mvopt.errors import InputFileError

__all__ = ["from_networkx"]


def from_networkx(graph: Any, *, nics_per_server: int = 1, gpus_per_server: int = 8,
                  name: str = "<networkx graph>") -> CompiledTopology:
    """Compile an undirected networkx (Multi)Graph.

    Nodes need ``role`` in {"host", "switch"}; edges need ``rate`` (Gb/s) and ``delay`` (ns).
    Hosts are numbered first in the graph's node order, then switches; when that changes any
    label, ``parameters["node_labels"]`` keeps the original label (as text) of every node.
    Problems raise InputFileError naming ``name``.
    """
    if graph.is_directed():
        raise InputFileError(name, None, "the graph must be undirected")
    roles = {}
    for v, data in graph.nodes(data=True):
        role = data.get("role")
        if role not in ("host", "switch"):
            raise InputFileError(name, None, f"node {v!r}: attribute 'role' must be 'host' or 'switch', got {role!r}")
        roles[v] = role
    order = [v for v in roles if roles[v] == "host"] + [v for v in roles if roles[v] == "switch"]
    index = {v: i for i, v in enumerate(order)}
    n_host = sum(r == "host" for r in roles.values())
    a, b, rate, delay = [], [], [], []
    for u, v, data in graph.edges(data=True):
        if "rate" not in data or "delay" not in data:
            raise InputFileError(name, None, f"edge ({u!r}, {v!r}) needs attributes 'rate' (Gb/s) and 'delay' (ns)")
        r, d = gbps_to_bps(data["rate"]), ns_to_ps(data["delay"])
        if r is None or d is None:
            raise InputFileError(name, None, f"edge ({u!r}, {v!r}): rate must be whole bits/s and delay "
                                 "whole picoseconds")
        a.append(index[u])
        b.append(index[v])
        rate.append(r)
        delay.append(d)
    a_arr, b_arr = np.array(a, np.int64), np.array(b, np.int64)
    sw_tier, link_tier = hop_layers(n_host, len(order), a_arr, b_arr)
    params: dict[str, Any] = {"topology": "graph", "source": name}
    if order != list(range(len(order))):
        params["node_labels"] = [str(v) for v in order]
    spec = NetworkSpec(kind="graph", parameters=params, n_host=n_host, switch_tier=sw_tier,
                       link_a=a_arr.astype(np.int32), link_b=b_arr.astype(np.int32),
                       link_rate_bps=np.array(rate, np.int64), link_delay_ps=np.array(delay, np.int64),
                       link_tier=link_tier, nics_per_server=nics_per_server, gpus_per_server=gpus_per_server)
    return compile_network(spec, source=name)
