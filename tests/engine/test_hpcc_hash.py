"""The HPCC simulator's ECMP: its MurmurHash3, its next-hop order, the paths it gives, and
explicit per-flow paths (taken as given, refused when not a path of the topology)."""

from __future__ import annotations

import pytest

from mvopt.cluster import read_hpcc_topology
from mvopt.engine.routes import explicit_path_rows
from mvopt.errors import InputFileError
from mvopt.io.hpcc import read_hpcc_flows
from mvopt.io.hpcc_paths import (check_paths, hpcc_ecmp_hash, hpcc_flow_paths, hpcc_next_hops, murmur3_32,
                                 read_hpcc_paths)

# leaf-spine: hosts 0, 1 on leaf 4, hosts 2, 3 on leaf 5, spines 6 and 7
LEAF_SPINE = """8 4 8
4 5 6 7
0 4 100Gbps 0.001ms 0
1 4 100Gbps 0.001ms 0
2 5 100Gbps 0.001ms 0
3 5 100Gbps 0.001ms 0
4 6 100Gbps 0.001ms 0
4 7 100Gbps 0.001ms 0
5 6 100Gbps 0.001ms 0
5 7 100Gbps 0.001ms 0
"""
# the same network with the switches numbered first (file ids differ from mvopt's node ids)
SWITCHES_FIRST = """8 4 8
0 1 2 3
4 0 100Gbps 0.001ms 0
5 0 100Gbps 0.001ms 0
6 1 100Gbps 0.001ms 0
7 1 100Gbps 0.001ms 0
0 2 100Gbps 0.001ms 0
0 3 100Gbps 0.001ms 0
1 2 100Gbps 0.001ms 0
1 3 100Gbps 0.001ms 0
"""
# four flows 0 -> 2 (source ports 10000..10003), then one each 1 -> 3 and 2 -> 0
FLOWS = "6\n" + "0 2 3 100 1000 2.0\n" * 4 + "1 3 3 100 1000 2.0\n2 0 3 100 1000 2.0\n"
IP = {h: 0x0B000001 + h * 0x100 for h in range(8)}     # node_id_to_ip of ids below 256


def _files(tmp_path, topo=LEAF_SPINE, flows=FLOWS):
    (tmp_path / "topo.txt").write_text(topo)
    (tmp_path / "flow.txt").write_text(flows)
    return read_hpcc_topology(tmp_path / "topo.txt"), read_hpcc_flows(tmp_path / "flow.txt")


@pytest.mark.parametrize("key, seed, expected", [
    # MurmurHash3 x86_32's published test vectors
    (b"", 0, 0), (b"", 1, 0x514E28B7), (b"", 0xFFFFFFFF, 0x81F16F39), (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B), (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634), (b"\x21\x43", 0, 0xA0F7B07A), (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE), (b"Hello, world!", 1234, 0xFAF6CDB3),
])
def test_murmur3_vectors(key, seed, expected):
    assert murmur3_32(key, seed) == expected


def test_ecmp_hash_is_murmur3_of_the_5_tuple_words():
    key = (IP[0]).to_bytes(4, "little") + (IP[2]).to_bytes(4, "little") + (10000 | 100 << 16).to_bytes(4, "little")
    assert hpcc_ecmp_hash(IP[0], IP[2], 10000, 100, 4) == murmur3_32(key, 4) == 0x03E6C3E4
    assert hpcc_ecmp_hash(IP[0], IP[2], 10000, 100, 5) != hpcc_ecmp_hash(IP[0], IP[2], 10000, 100, 4)  # per-switch seed


def test_next_hops_in_the_reference_order(tmp_path):
    topo, _ = _files(tmp_path)
    # breadth-first from host 2: leaf 5, then its neighbours in descending id (spine 7 before 6)
    assert hpcc_next_hops(topo, 2) == {5: [2], 7: [5], 6: [5], 4: [7, 6]}


def _expected(flows_ports):
    """Paths through the leaf-spine by hand: source leaf, the spine the hash picks among [7, 6]
    (the source leaf's next hops), destination leaf."""
    out = []
    for src, dst, sport in flows_ports:
        leaf_s, leaf_d = 4 + src // 2, 4 + dst // 2
        out.append([leaf_s, [7, 6][hpcc_ecmp_hash(IP[src], IP[dst], sport, 100, leaf_s) % 2], leaf_d])
    return out


def test_hash_reproduces_the_path_list(tmp_path):
    topo, flows = _files(tmp_path)
    both = hpcc_flow_paths(topo, flows)
    paths = [d for d, _ in both]
    assert paths == _expected([(0, 2, 10000), (0, 2, 10001), (0, 2, 10002), (0, 2, 10003), (1, 3, 10000),
                               (2, 0, 10000)])
    assert paths == [[4, 7, 5], [4, 7, 5], [4, 7, 5], [4, 6, 5], [4, 7, 5], [5, 7, 4]]


def test_paths_follow_file_ids(tmp_path):
    # hosts are file ids 4..7 here, switches 0..3: the same paths, renumbered
    flows = "2\n4 6 3 100 1000 2.0\n6 4 3 100 1000 2.0\n"
    topo, fl = _files(tmp_path, SWITCHES_FIRST, flows)
    assert hpcc_next_hops(topo, 6) == {1: [6], 3: [1], 2: [1], 0: [3, 2]}
    seeds_picks = [hpcc_ecmp_hash(0x0B000401, 0x0B000601, 10000, 100, 0) % 2,
                   hpcc_ecmp_hash(0x0B000601, 0x0B000401, 10000, 100, 1) % 2]
    assert [d for d, _ in hpcc_flow_paths(topo, fl)] == [[0, [3, 2][seeds_picks[0]], 1], [1, [3, 2][seeds_picks[1]], 0]]


def test_explicit_paths_taken_exactly(tmp_path):
    topo, flows = _files(tmp_path)
    text = "6\n4 6 5\n4 7 5\n4 6 5\n4 6 5\n4 7 5\n5 6 4\n"
    (tmp_path / "paths.txt").write_text(text)
    assert read_hpcc_paths(tmp_path / "paths.txt", topo, flows) == \
        [[4, 6, 5], [4, 7, 5], [4, 6, 5], [4, 6, 5], [4, 7, 5], [5, 6, 4]]


@pytest.mark.parametrize("text, line, match", [
    ("", None, "empty file"),
    ("x\n", 1, "expected the number of paths, got 'x'"),
    ("2\n4 6 5\n", 1, "says 2 paths but 1 lines follow"),
    ("1\n4 6 5\n", None, "holds 1 paths for 6 flows"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n5 6 x\n", 7, "cannot parse switch id 'x'"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n5 9 4\n", 7, "flow 5 (2 -> 0): path 5 9 4: 9 is not a switch id"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n5 1 4\n", 7, "1 is not a switch id"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n5 6 7 4\n", 7, "no link between nodes 6 and 7"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n", 7, "flow 5 (2 -> 0): path 4 6 5: no link between nodes 2 and 4"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n5 6 4 6 4\n", 7, "passes a switch twice"),
    ("6\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n4 6 5\n\n5 6\n", 8, "no link between nodes 6 and 0"),
])
def test_bad_paths_refused(tmp_path, text, line, match):
    topo, flows = _files(tmp_path)
    (tmp_path / "paths.txt").write_text(text)
    with pytest.raises(InputFileError) as e:
        read_hpcc_paths(tmp_path / "paths.txt", topo, flows)
    assert (e.value.line, match in str(e.value)) == (line, True), str(e.value)


def test_empty_path_refused(tmp_path):
    topo, flows = _files(tmp_path)
    with pytest.raises(InputFileError, match="flow 0 .*passes at least one switch"):
        check_paths(topo, flows[:1], [[]])


def test_ack_paths_hash_the_swapped_5_tuple(tmp_path):
    topo, flows = _files(tmp_path)
    assert hpcc_next_hops(topo, 0)[5] == [7, 6]
    acks = [a for _, a in hpcc_flow_paths(topo, flows)]
    expected = [[5, [7, 6][hpcc_ecmp_hash(IP[2], IP[0], 100, sport, 5) % 2], 4] for sport in range(10000, 10004)]
    assert acks[:4] == expected
    assert acks[5] == [4, [7, 6][hpcc_ecmp_hash(IP[0], IP[2], 100, 10000, 4) % 2], 5]


# ------------------------------------------------------------------------------ in the engine


def _shortest_paths(topo, src: int, dst: int) -> list[list[int]]:
    """Every equal-cost path from host src to host dst, as switch node ids."""
    out = []

    def extend(node: int, path: list[int]) -> None:
        if node == dst:
            out.append(path)
            return
        for p in topo.next_hop_ports(node, dst):
            extend(int(topo.port_peer_node[p]), path + [node])

    extend(int(topo.port_peer_node[topo.node_port_offset[src]]), [])
    return out


def _two_flows(paths=None, ack_paths=None, **net):
    from engine_cases import fat_tree
    from mvopt.engine import TaskGraphBuilder
    from mvopt.testing import scenarios as sc

    topo = fat_tree()
    g = TaskGraphBuilder()
    g.flow(0, 15, 200_000)          # two flows of one edge switch to another pod's hosts
    g.flow(1, 14, 200_000)
    exp = sc.experiment(topo, g, cc="none", **net)
    import dataclasses
    return dataclasses.replace(exp, paths=paths, ack_paths=ack_paths), topo


def test_explicit_paths_taken_and_match_the_reference(backend):
    from engine_cases import assert_matches_reference, run1

    _, topo = _two_flows()
    a, b = _shortest_paths(topo, 0, 15), _shortest_paths(topo, 1, 14)
    assert len(a) == len(b) == 4
    # both flows through the same aggregation and core switches share every link up there...
    shared, _ = _two_flows({0: a[0], 1: b[0]})
    # ...or through disjoint ones (another aggregation switch of the edge: no link in common)
    apart = next(p for p in b if p[1] != a[0][1])
    disjoint, _ = _two_flows({0: a[0], 1: apart}, {0: list(reversed(a[1])), 1: list(reversed(apart))})
    r_shared, r_disjoint = run1(backend, shared), run1(backend, disjoint)
    assert r_shared.status == r_disjoint.status == "done"
    assert r_shared.makespan_ps > 1.5 * r_disjoint.makespan_ps     # one link's rate shared by two flows
    assert_matches_reference(r_shared, shared)
    assert_matches_reference(r_disjoint, disjoint)
    # the rows the batch holds are the given paths' ports
    rows = explicit_path_rows(disjoint)
    for t, (path, back) in enumerate(((a[0], a[1][::-1]), (apart, apart[::-1]))):
        for way, sw in enumerate((path, back)):
            nodes = [int(topo.port_peer_node[topo.node_port_offset[v] + k]) for v, k in zip(sw, rows[t, way])]
            assert nodes[:-1] == list(sw[1:])


@pytest.mark.parametrize("paths, net, where, match", [
    ({0: [99]}, {}, "paths[0]", "is not a switch"),
    ({0: [16, 16]}, {}, "paths[0]", "each switch once"),
    ({0: []}, {}, "paths[0]", "at least one switch"),
    ({5: [16]}, {}, "paths[5]", "ids of flow tasks"),
    ({0: "first"}, {}, "paths[0]", "switch node ids"),
    (None, {"ecmp_hash": "hpcc"}, "network.ecmp_hash", "5-tuples of HPCC flow files"),
    ([[16, 20, 28]], {}, "paths", "a mapping from flow task id"),
])
def test_bad_explicit_paths_refused(paths, net, where, match):
    from mvopt.errors import ConfigError
    exp, _ = _two_flows(paths, **net)
    with pytest.raises(ConfigError) as e:
        explicit_path_rows(exp)
    assert e.value.path == where and match in str(e.value), str(e.value)


@pytest.mark.parametrize("lb", ["spray", "adaptive"])
def test_explicit_paths_need_ecmp(lb):
    from mvopt.errors import ConfigError
    _, topo = _two_flows()
    exp, _ = _two_flows({0: _shortest_paths(topo, 0, 15)[0]}, lb=lb)
    with pytest.raises(ConfigError, match=f"network.lb: explicit per-flow paths .*'ecmp', got '{lb}'"):
        exp.params      # refused with the configuration, before any routing


def test_a_path_not_linked_refused():
    from mvopt.errors import ConfigError
    _, topo = _two_flows()
    a = _shortest_paths(topo, 0, 15)[0]
    exp, _ = _two_flows({0: [a[0], a[2], a[1], a[3], a[4]]})
    with pytest.raises(ConfigError, match=r"paths\[0\].*not linked"):
        explicit_path_rows(exp)
    exp, _ = _two_flows({0: a}, {0: a})          # the way back must start at the destination's switch
    with pytest.raises(ConfigError, match=r"ack_paths\[0\].*not linked"):
        explicit_path_rows(exp)


# ------------------------------------------------------------------------------ from HPCC files

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "hpcc"


def _hpcc_experiment(topo, flows, explicit=None, cc="dcqcn"):
    import dataclasses

    from mvopt.engine import TaskGraphBuilder
    from mvopt.io.hpcc import add_hpcc_flows
    from mvopt.io.hpcc_paths import experiment_paths
    from mvopt.testing import scenarios as sc

    g = TaskGraphBuilder()
    add_hpcc_flows(g, flows, topo)
    paths, ack_paths = experiment_paths(topo, flows, explicit)
    exp = sc.experiment(topo, g, cc=cc, ecmp_hash="mvopt" if explicit is not None else "hpcc")
    return dataclasses.replace(exp, paths=paths, ack_paths=ack_paths)


@pytest.mark.parametrize("cc", ["dcqcn", "hpcc"])
def test_hpcc_hash_in_the_engine_matches_the_reference(backend, tmp_path, cc):
    from engine_cases import assert_matches_reference, run1

    flows = "8\n" + "".join(f"{s} {d} 3 100 30000 2.0\n" for s, d in [(0, 2), (0, 2), (0, 3), (1, 2), (1, 3), (1, 3),
                                                                       (2, 0), (3, 1)])
    topo, fl = _files(tmp_path, flows=flows)
    exp = _hpcc_experiment(topo, fl, cc=cc)
    both = hpcc_flow_paths(topo, fl)
    assert exp.paths == {i: d for i, (d, _) in enumerate(both)}     # file ids are node ids here
    assert exp.ack_paths == {i: a for i, (_, a) in enumerate(both)}
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    assert_matches_reference(r, exp)


def test_parallel_links_use_the_last_listed(backend):
    # examples/hpcc: two 400 Gb/s links between switches 8 and 9; the HPCC simulator keeps the last
    from engine_cases import assert_matches_reference, run1

    topo = read_hpcc_topology(EXAMPLES / "topology.txt")
    flows = read_hpcc_flows(EXAMPLES / "flow.txt")
    exp = _hpcc_experiment(topo, flows)
    egress = explicit_path_rows(exp)
    cross = [t for t, p in exp.paths.items() if len(p) == 2]
    assert cross
    for t in cross:
        first = exp.paths[t][0]
        port = int(topo.node_port_offset[first]) + int(egress[t, 0, 0])
        peer_ports = [p for p in range(topo.node_port_offset[first], topo.node_port_offset[first + 1])
                      if topo.port_peer_node[p] == exp.paths[t][1]]
        assert len(peer_ports) == 2 and port == peer_ports[-1]
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    assert_matches_reference(r, exp)


def test_simulate_hpcc_paths_file(tmp_path, capsys):
    from mvopt.__main__ import main

    topo, flows = _files(tmp_path)
    (tmp_path / "paths.txt").write_text("6\n4 6 5\n4 6 5\n4 7 5\n4 6 5\n4 7 5\n5 6 4\n")
    args = ["simulate", "--hpcc-topology", str(tmp_path / "topo.txt"), "--hpcc-flows", str(tmp_path / "flow.txt"),
            "--fct-out", str(tmp_path / "fct.txt")]
    assert main(args + ["--hpcc-paths", str(tmp_path / "paths.txt")]) == 0
    assert len((tmp_path / "fct.txt").read_text().splitlines()) == 6
    (tmp_path / "paths.txt").write_text("6\n4 6 5\n4 6 5\n4 7 5\n4 6 5\n4 7 5\n5 6 3\n")
    assert main(args + ["--hpcc-paths", str(tmp_path / "paths.txt"), "--fct-out", str(tmp_path / "bad.txt")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'paths.txt'}:7: flow 5 (2 -> 0): path 5 6 3: 3 is not a switch id" in err, err
    assert not (tmp_path / "bad.txt").exists()
