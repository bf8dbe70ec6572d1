"""Adaptive routing per flowlet (network.flowlet_gap_ns; docs/engine.md, "Switch arrival"): a flow
keeps its egress while its packets are closer than the gap, so a gap longer than any pause keeps
every flow on one path (no reordering), and every backend equals the reference simulator."""

from __future__ import annotations

import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder, simulate
from mvopt.errors import ConfigError

from engine_cases import assert_matches_reference

FAT_TREE = {"topology": "fat_tree", "k": 4, "gpus_per_server": 1}


def _exp(gap, transport: str = "gbn", cc: str = "dcqcn", name: str = "e", **cluster) -> Experiment:
    """Every host sends 100 KB to the host 4 further on (pod p to pod p + 1)."""
    g = TaskGraphBuilder()
    for src in range(16):
        g.flow(src, (src + 4) % 16, 100_000)
    cfg = load_config({"cluster": {**FAT_TREE, **cluster},
                       "network": {"cc": cc, "lb": "adaptive", "transport": transport, "flowlet_gap_ns": gap}})
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), name=name, seed=2)


def test_a_long_gap_keeps_each_flow_on_one_path(backend) -> None:
    """Per packet, adaptive routing reorders go-back-N flows into retransmissions; with a gap of
    1 ms no flow pauses that long, so each keeps the egress its first packet took at every switch:
    nothing is reordered, nothing retransmitted."""
    per_packet, flowlets = simulate([_exp(None), _exp(1e6)], backend=backend)
    assert per_packet.ok and flowlets.ok
    assert per_packet.counters["data_packets_retransmitted"] > 0 and per_packet.counters["out_of_order_packets"] > 0
    c = flowlets.counters
    assert c["data_packets_retransmitted"] == c["out_of_order_packets"] == c["nacks_sent"] == 0


def test_flowlets_equal_the_reference(backend) -> None:
    """Gaps from shorter than a packet (only packets at the same time share an entry's choice) to
    longer than the run, both transports, with a link going down under the flowlets (an entry
    whose port is no longer a next hop is not kept), in one batch: each equals the reference."""
    exps = [_exp(0.001, "gbn", name="1ps"), _exp(500.0, "sr", "hpcc", name="500ns"),
            _exp(2000.0, "sr", "dctcp", name="2us-down", link_down=[[2, 0, 4000]]), _exp(None, "sr", name="per-packet")]
    for r, e in zip(simulate(exps, backend=backend), exps):
        assert r.ok, e.name
        assert_matches_reference(r, e)


@pytest.mark.parametrize("network, message", [
    ({"lb": "ecmp", "flowlet_gap_ns": 500.0}, "network.flowlet_gap_ns: applies to network.lb: adaptive only"),
    ({"lb": "adaptive", "flowlet_gap_ns": 0}, "network.flowlet_gap_ns"),
])
def test_bad_flowlet_gap_is_refused(network: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config({"cluster": FAT_TREE, "network": network})
