"""Failed links, degraded links, slow NICs and the NIC efficiency (cluster.failed_links /
degraded_links / slow_nics / nic_efficiency)."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder, simulate
from mvopt.errors import ConfigError

FAT_TREE = {"topology": "fat_tree", "k": 4}
# k = 4: hosts 0..15, edges 16..23, aggregations 24..31 (pod p: 24+2p, 25+2p), cores 32..35;
# tier-2 link 0 joins aggregation 0 of pod 0 (node 24) to core 0 (node 32)
AGG0, CORE0, CORE1 = 24, 32, 33


def _topo(**cluster):
    return build_topology(load_config({"cluster": {**FAT_TREE, **cluster}}).cluster)


def _port(topo, a: int, b: int) -> np.ndarray:
    return np.flatnonzero((topo.port_node == a) & (topo.port_peer_node == b))


def test_failed_spine_link_is_removed_and_routing_avoids_it():
    whole, failed = _topo(), _topo(failed_links=[[2, 0]])
    assert failed.n_link == whole.n_link - 1
    assert _port(failed, AGG0, CORE0).size == 0 and _port(failed, CORE0, AGG0).size == 0
    # upward from the aggregation switch: both cores before, only core 1 after
    assert sorted(whole.port_peer_node[whole.next_hop_ports(AGG0, 4)].tolist()) == [CORE0, CORE1]
    assert failed.port_peer_node[failed.next_hop_ports(AGG0, 4)].tolist() == [CORE1]
    # the edge switches still use both aggregation switches: each keeps a shortest path up
    for edge in (16, 17):
        ups = failed.port_peer_node[failed.next_hop_ports(edge, 4)].tolist()
        assert ups == [AGG0, AGG0 + 1]
    # traffic into pod 0 from pod 1's aggregation 0 now leaves through core 1 only
    assert failed.port_peer_node[failed.next_hop_ports(26, 0)].tolist() == [CORE1]


def test_failed_spine_link_traffic_moves_to_the_remaining_paths():
    """Pod 0 sends to pod 1 with spraying: with the link down every byte crosses the remaining
    uplinks of aggregation 0 and the iteration completes."""
    g = TaskGraphBuilder()
    for src in range(4):
        g.flow(src, 4 + src, 200_000)
    graph = g.build()
    results = {}
    for name, topo in (("whole", _topo()), ("failed", _topo(failed_links=[[2, 0]]))):
        cfg = load_config({"cluster": FAT_TREE, "network": {"cc": "none", "lb": "spray"}})
        results[name] = (topo, simulate([Experiment(topology=topo, network=cfg.network, tasks=graph,
                                                    name=name)], backend="cpu")[0])
    whole_topo, whole = results["whole"]
    topo, res = results["failed"]
    assert whole.ok and res.ok
    assert (res.flow_fct_ps > 0).all()
    assert whole.port_tx_bytes[_port(whole_topo, AGG0, CORE0)].sum() > 0
    # aggregation 0's share of the pod's traffic now all goes through core 1
    up0 = res.port_tx_bytes[_port(topo, AGG0, CORE1)].sum()
    assert up0 >= whole.port_tx_bytes[_port(whole_topo, AGG0, CORE0)].sum() \
        + whole.port_tx_bytes[_port(whole_topo, AGG0, CORE1)].sum() * 0.5
    assert res.makespan_ps >= whole.makespan_ps


def test_degraded_link_and_slow_nic_rates_in_the_compiled_topology():
    topo = _topo(degraded_links=[[2, 0, 0.25]], slow_nics=[[5, 0.5]])
    for a, b in ((AGG0, CORE0), (CORE0, AGG0)):
        assert topo.port_rate_bps[_port(topo, a, b)].tolist() == [25_000_000_000]
    assert topo.port_rate_bps[topo.host_port(5)] == 50_000_000_000
    assert topo.port_rate_bps[_port(topo, 18, 5)].tolist() == [50_000_000_000]
    whole = _topo()
    changed = np.flatnonzero(topo.port_rate_bps != whole.port_rate_bps)
    assert changed.size == 4                       # both directions of two links


def test_nic_efficiency_scales_every_host_link_and_composes_with_a_slow_nic():
    topo, whole = _topo(nic_efficiency=0.8, slow_nics=[[5, 0.5]]), _topo()
    for h in range(16):
        assert topo.port_rate_bps[topo.host_port(h)] == (40 if h == 5 else 80) * 10**9
    changed = np.flatnonzero(topo.port_rate_bps != whole.port_rate_bps)
    assert changed.size == 32                      # both directions of the 16 host links, nothing else
    # a flow between two hosts takes 1 / 0.8 of its line-rate serialisation time
    g = TaskGraphBuilder()
    g.flow(0, 1, 8_000_000)
    graph = g.build()
    net = load_config({"cluster": FAT_TREE, "network": {"cc": "none"}}).network
    fast, slow = (simulate([Experiment(topology=t, network=net, tasks=graph, name="x")], backend="cpu")[0]
                  for t in (whole, _topo(nic_efficiency=0.8)))
    assert slow.makespan_ps == pytest.approx(fast.makespan_ps / 0.8, rel=0.01)


@pytest.mark.parametrize("cluster, field, words", [
    ({"failed_links": [[2, 16]]}, "cluster.failed_links[0]", "tier 2 has 16 links"),
    ({"failed_links": [[4, 0]]}, "cluster.failed_links[0]", "tiers [0, 1, 2] only"),
    ({"failed_links": [[0, 3]]}, "cluster.failed_links", "slow_nics"),
    ({"degraded_links": [[1, 16, 0.5]]}, "cluster.degraded_links[0]", "tier 1 has 16 links"),
    ({"degraded_links": [[1, 0, 1.5]]}, "cluster.degraded_links", "rate_factor <= 1"),
    ({"degraded_links": [[1, 0, 0.123456789123]]}, "cluster.degraded_links[0]", "whole number of bits/s"),
    ({"slow_nics": [[16, 0.5]]}, "cluster.slow_nics[0]", "hosts are 0..15"),
    ({"nic_efficiency": 0}, "cluster.nic_efficiency", "0 < x <= 1"),
    ({"nic_efficiency": 0.123456789123}, "cluster.nic_efficiency", "whole number of bits/s"),
    ({"failed_links": [[2, 0], [2, 1], [2, 2], [2, 3]]}, "cluster.failed_links", "without a path"),
])
def test_faults_naming_nothing_that_exists_are_refused(cluster, field, words):
    with pytest.raises(ConfigError) as e:
        _topo(**cluster)
    assert e.value.path == field and words in str(e.value)


def test_failed_link_on_a_topology_file(tmp_path):
    from mvopt.cluster import write_hpcc_topology
    path = tmp_path / "ft.txt"
    write_hpcc_topology(_topo(), path)
    cfg = load_config({"cluster": {"topology": "file", "topology_file": str(path), "failed_links": [[2, 0]]}})
    topo = build_topology(cfg.cluster)
    assert topo.n_link == _topo().n_link - 1
