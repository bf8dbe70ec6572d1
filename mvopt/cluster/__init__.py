"""Cluster hardware: topology builders, routing, and the compiled arrays the engine runs on.

>>> from mvopt.config import load_config
>>> from mvopt.cluster import build_topology
>>> topo = build_topology(load_config({"cluster": {"topology": "fat_tree", "k": 4}}).cluster)
>>> topo.n_host, topo.n_switch, topo.n_link
(16, 20, 48)

docs/topologies.md describes every topology, its wiring and routing, and the compiled layout.
"""

from mvopt.cluster.build import build_topology
from mvopt.cluster.compiled import CompiledTopology
from mvopt.cluster.graph import from_networkx
from mvopt.cluster.hpcc import format_hpcc_topology, read_hpcc_topology, write_hpcc_topology
from mvopt.cluster.summary import bisection_bandwidth, min_cut_bisection, summarize

__all__ = [
    "build_topology", "CompiledTopology", "from_networkx", "read_hpcc_topology", "write_hpcc_topology",
    "format_hpcc_topology", "summarize", "bisection_bandwidth", "min_cut_bisection",
]
