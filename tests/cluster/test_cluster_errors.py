"""Invalid cluster configurations: config-level errors (load_config) and builder-level errors."""

from __future__ import annotations

import pytest

from cluster_helpers import build
from mvopt.config import load_config
from mvopt.errors import ConfigError


@pytest.mark.parametrize("cluster,message", [
    ({"topology": "fat_tree", "k": 5}, "cluster.k: must be an even integer >= 2, got 5"),
    ({"topology": "fat_tree", "k": 0}, "cluster.k: must be an even integer >= 2, got 0"),
    ({"topology": "leaf_spine", "leaves": 2, "hosts_per_leaf": 0}, "cluster.hosts_per_leaf: must be > 0, got 0"),
    ({"topology": "fat_tree", "k": 4, "kk": 4}, "cluster.kk: unknown key"),
    ({"topology": "fat_tree", "k": 4, "link_delay_ns": [100, -1]},
     "cluster.link_delay_ns: must be a non-empty list of delays >= 0, got [100.0, -1.0]"),
    ({"topology": "torus", "torus_dims": [4]}, "cluster.torus_dims: must list 2 or 3 dimensions"),
    ({"topology": "dragonfly", "groups": 1, "routers_per_group": 2, "hosts_per_router": 1}, "cluster.groups: must be >= 2"),
    ({"topology": "leaf_spine", "leaves": 2}, "cluster.hosts_per_leaf: is required for topology 'leaf_spine'"),
])
def test_config_errors(cluster, message):
    with pytest.raises(ConfigError) as err:
        load_config({"cluster": cluster})
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("cluster,path,message", [
    (dict(topology="leaf_spine", leaves=2, hosts_per_leaf=32, oversubscription=3.0), "cluster.oversubscription",
     "(here 32 x 100 / (3 x 100) = 10.67), got 3.0"),
    (dict(topology="leaf_spine", leaves=2, hosts_per_leaf=2, link_gbps=[100, 400]), "cluster.oversubscription",
     "= 0.5)"),
    (dict(topology="rail_optimized", servers=12, servers_per_group=2, tiers=3, groups_per_pod=4),
     "cluster.groups_per_pod", "must divide the number of rail groups (servers / servers_per_group = 6), got 4"),
    (dict(topology="rail_optimized", servers=8, servers_per_group=2, gpus_per_server=2, tiers=3, groups_per_pod=2,
          link_gbps=[100, 100, 300]), "cluster.link_gbps", "4 x 100 / 300 = 1.333"),
    (dict(topology="dragonfly", groups=9, routers_per_group=2, hosts_per_router=1, global_links_per_router=3),
     "cluster.global_links_per_router", "must be >= 4 so that every pair of the 9 groups is connected"),
    (dict(topology="leaf_spine", leaves=3, hosts_per_leaf=3, nics_per_server=2, gpus_per_server=2),
     "cluster.nics_per_server", "must divide the number of hosts (9), got 2"),
    (dict(topology="fat_tree", k=4, link_delay_ns=[0.0001]), "cluster.link_delay_ns",
     "every delay must be a whole number of picoseconds"),
    (dict(topology="fat_tree", k=4, link_gbps=[1e-10]), "cluster.link_gbps",
     "every rate must be a whole number of bits/s"),
])
def test_builder_errors(cluster, path, message):
    with pytest.raises(ConfigError) as err:
        build(**cluster)
    assert err.value.path == path
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_fractional_values_that_are_exact_are_accepted():
    t = build(topology="leaf_spine", leaves=2, hosts_per_leaf=3, oversubscription=1.5, link_delay_ns=[0.001, 2.5])
    assert t.n_switch == 2 + 2 and set(t.port_delay_ps.tolist()) == {1, 2500}
