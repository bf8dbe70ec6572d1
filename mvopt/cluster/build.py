"""``build_topology``: from a validated ClusterConfig to a CompiledTopology."""

from __future__ import annotations

import os
from typing import Any, Callable

from mvopt.cluster.clos import build_fat_tree, build_leaf_spine, build_rail_optimized
from mvopt.cluster.compile import compile_network
from mvopt.cluster.compiled import CompiledTopology
from mvopt.cluster.direct import build_dragonfly, build_torus
from mvopt.cluster.faults import link_faults
from mvopt.cluster.hpcc import read_hpcc_topology
from mvopt.cluster.spec import NetworkSpec, config_parameters

__all__ = ["build_topology", "BUILDERS"]

BUILDERS: dict[str, Callable[[Any], NetworkSpec]] = {
    "fat_tree": build_fat_tree,
    "leaf_spine": build_leaf_spine,
    "rail_optimized": build_rail_optimized,
    "torus": build_torus,
    "dragonfly": build_dragonfly,
}


def build_topology(cluster: Any, base_dir: str | os.PathLike = ".") -> CompiledTopology:
    """Build, validate, route and compile the topology a ClusterConfig describes.

    ``base_dir`` resolves a relative ``topology_file`` (pass ``ExperimentConfig.base_dir``).
    Invalid parameters raise ConfigError; a bad topology file raises InputFileError. For
    ``topology: file`` the link rates and delays come from the file, not from ``link_gbps``.
    ``failed_links``, ``degraded_links`` and ``slow_nics`` are applied before routing
    (:mod:`mvopt.cluster.faults`).
    """
    if cluster.topology == "file":
        path = cluster.topology_file
        if not os.path.isabs(path):
            path = os.path.normpath(os.path.join(os.fspath(base_dir), path))
        return read_hpcc_topology(path, nics_per_server=cluster.resolved_nics_per_server,
                                  gpus_per_server=cluster.gpus_per_server,
                                  parameters=config_parameters(cluster), faults=link_faults(cluster))
    spec = BUILDERS[cluster.topology](cluster)
    return compile_network(spec, source=f"cluster.topology {cluster.topology!r}", faults=link_faults(cluster))
