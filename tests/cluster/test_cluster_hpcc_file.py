"""The HPCC/ns-3 topology text format: a hand-written file, bad files, and the writer."""

from __future__ import annotations

import numpy as np
import pytest

from cluster_helpers import build, check_routing, check_structure
from mvopt.cluster import build_topology, format_hpcc_topology, read_hpcc_topology
from mvopt.config import load_config
from mvopt.errors import InputFileError

# 4 hosts (0-3), 2 leaves (4, 5), 1 spine (6); the spine uplinks are 400 Gb/s, 0.5 us
HAND = """\
7 3 6
4 5 6
0 4 100Gbps 0.001ms 0
1 4 100Gbps 1000ns 0
2 5 100000Mbps 1us 0
3 5 100Gbps 0.000001s 0
4 6 400Gbps 500ns 0
6 5 400Gbps 0.5us 0
"""


def _write(tmp_path, text, name="topo.txt"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_hand_written_file(tmp_path):
    topo = read_hpcc_topology(_write(tmp_path, HAND))
    assert (topo.kind, topo.n_host, topo.n_switch, topo.n_link) == ("file", 4, 3, 6)
    assert topo.node_tier.tolist() == [0, 0, 0, 0, 1, 1, 2]
    assert (topo.port_rate_bps[:4] == 100 * 10**9).all() and (topo.port_delay_ps[:4] == 1_000_000).all()
    spine = 6
    ports = np.arange(topo.node_port_offset[spine], topo.node_port_offset[spine + 1])
    assert (topo.port_rate_bps[ports] == 400 * 10**9).all() and (topo.port_delay_ps[ports] == 500_000).all()
    assert set(topo.port_peer_node[ports]) == {4, 5} and (topo.port_tier[ports] == 1).all()
    assert topo.diameter_hops == 4
    assert "file_node_ids" not in topo.parameters
    check_structure(topo)
    check_routing(topo)


def test_switch_ids_anywhere_are_renumbered(tmp_path):
    # switch 0 with hosts 1, 2: mvopt numbers hosts first
    topo = read_hpcc_topology(_write(tmp_path, "3 1 2\n0\n1 0 10Gbps 1us 0\n0 2 10Gbps 1us 0\n"))
    assert topo.n_host == 2 and topo.parameters["file_node_ids"] == [1, 2, 0]
    assert topo.port_peer_node[:2].tolist() == [2, 2]


def test_config_topology_file_relative_to_config(tmp_path):
    _write(tmp_path, HAND)
    yaml_path = tmp_path / "exp.yaml"
    yaml_path.write_text("cluster:\n  topology: file\n  topology_file: topo.txt\n  nics_per_server: 2\n")
    cfg = load_config(yaml_path)
    topo = build_topology(cfg.cluster, base_dir=cfg.base_dir)
    assert topo.n_server == 2 and topo.parameters["topology_file"] == "topo.txt"


@pytest.mark.parametrize("kw", [dict(topology="torus", torus_dims=[3, 3], link_gbps=[100, 12.5], link_delay_ns=[1000, 0.5]),
                                dict(topology="fat_tree", k=4)])
def test_write_then_read_is_identical(tmp_path, kw):
    topo = build(**kw)
    text = format_hpcc_topology(topo)
    assert text.splitlines()[0] == f"{topo.n_node} {topo.n_switch} {topo.n_link}"
    if kw["topology"] == "torus":
        assert "12500Mbps 0.5ns 0" in text
    back = read_hpcc_topology(_write(tmp_path, text))
    for name in ("node_port_offset", "port_peer_node", "port_peer_port", "port_tier", "node_tier", "port_rate_bps", "port_delay_ps", "route_dst_lo",
                 "route_nhset", "nhset_port"):
        assert np.array_equal(getattr(topo, name), getattr(back, name)), name


BAD = {
    "header": ("7 3\n4 5 6\n", 1, "expected '<nodes> <switches> <links>'"),
    "too few links": (HAND.replace("7 3 6", "7 3 7"), None, "has 6 link lines, the header says 7"),
    "too many links": (HAND.replace("7 3 6", "7 3 5"), 8, "has 6 link lines, the header says 5"),
    "switch count": (HAND.replace("4 5 6\n", "4 5\n"), 2, "lists 2 switch ids, the header says 3"),
    "unknown node": (HAND.replace("3 5 100Gbps", "9 5 100Gbps"), 6, "unknown node id 9"),
    "unknown switch": (HAND.replace("4 5 6\n", "4 5 7\n"), 2, "unknown node id 7"),
    "negative delay": (HAND.replace("500ns", "-500ns"), 7, "negative delay"),
    "bad rate unit": (HAND.replace("0 4 100Gbps", "0 4 100GBs"), 3, "cannot parse rate '100GBs'"),
    "bad delay unit": (HAND.replace("1000ns", "1000xs"), 4, "cannot parse delay '1000xs'"),
    "sub-picosecond": (HAND.replace("1000ns", "0.0001ns"), 4, "not a whole number of picoseconds"),
    "zero rate": (HAND.replace("0 4 100Gbps", "0 4 0Gbps"), 3, "must be > 0"),
    "field count": (HAND.replace("1 4 100Gbps 1000ns 0", "1 4 100Gbps 1000ns"), 4, "expected '<src> <dst>"),
    "error rate": (HAND.replace("1000ns 0", "1000ns 0.01"), 4, "error rate 0.01 is not supported"),
    "host with two links": (HAND.replace("3 5 100Gbps", "2 4 100Gbps"), 6, "host 2 has 2 links"),
    "host without link": ("3 1 1\n2\n0 2 1Gbps 1us 0\n", None, "host 1 has 0 links"),
    "host to host": (HAND.replace("3 5 100Gbps", "3 0 100Gbps"), 6, "link between two hosts (3 and 0)"),
    "self loop": (HAND.replace("4 6 400Gbps", "4 4 400Gbps"), 7, "link from node 4 to itself"),
    "disconnected": (HAND.replace("7 3 6", "7 3 5").replace("6 5 400Gbps 0.5us 0\n", ""), None,
                     "the network is disconnected"),
    "not a number": (HAND.replace("0 4 100Gbps", "0 x 100Gbps"), 3, "cannot parse node ids"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files(tmp_path, case):
    text, line, message = BAD[case]
    path = _write(tmp_path, text)
    with pytest.raises(InputFileError) as err:
        read_hpcc_topology(path)
    assert err.value.line == line and err.value.file == str(path)
    assert message in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError, match="cannot be read"):
        read_hpcc_topology(tmp_path / "nope.txt")
