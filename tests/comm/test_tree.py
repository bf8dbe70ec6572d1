"""Double binary tree (NCCL's trees), tree all-reduce flows, algorithm choice, hierarchical collectives."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.build import build_experiment, run
from mvopt.comm.hierarchical import add_group_collective
from mvopt.comm.tree import add_tree_all_reduce, btree, choose_algorithm, dtree
from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder
from mvopt.engine.tasks import FLOW, topological_order
from mvopt.errors import ConfigError


def test_btree_matches_nccls_figure():
    # NCCL src/graph/trees.cc, ranks 0..13: 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3
    assert btree(14, 0) == (-1, [8])
    assert btree(14, 8) == (0, [4, 12])
    assert btree(14, 12) == (8, [10, 13])
    assert btree(14, 13) == (12, [])
    assert btree(14, 6) == (4, [5, 7])
    assert btree(14, 1) == (2, [])
    assert btree(13, 12) == (8, [10])      # 13 ranks: 12's right child does not exist


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 16, 24])
def test_both_trees_span_every_rank_once(n):
    for parent, children in dtree(n):
        assert parent.count(-1) == 1
        for r in range(n):
            for c in children[r]:
                assert parent[c] == r
        # every rank reaches the root
        for r in range(n):
            seen, v = set(), r
            while parent[v] >= 0:
                assert v not in seen
                seen.add(v)
                v = parent[v]
    if n > 2 and n % 2 == 0:   # the mirror tree's root is rank n-1
        assert dtree(n)[1][0].index(-1) == n - 1


@pytest.mark.parametrize("n,channels,chunk", [(2, 1, None), (5, 2, None), (8, 1, 1000), (13, 3, 777)])
def test_tree_all_reduce_moves_2_n_minus_1_buffers_and_is_acyclic(n, channels, chunk):
    b = TaskGraphBuilder()
    hosts = list(range(10, 10 + n))
    size = 100_003
    done = add_tree_all_reduce(b, hosts, size, channels=channels, chunk_bytes=chunk)
    g = b.build()
    assert topological_order(g) is not None
    flows = g.kind == FLOW
    # per tree every non-root rank sends its half up and receives it down
    assert int(g.size_bytes[flows].sum()) == 2 * (n - 1) * size
    for h in hosts:
        assert done[h] and all(int(g.dst[t]) == h for t in done[h])


def test_tree_all_reduce_on_an_idle_network_is_close_to_its_closed_form():
    base = {"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none", "payload_bytes": 4096},
            "workload": {"kind": "collective"},
            "collective": {"op": "all_reduce", "bytes": 8 << 20, "hosts": [0, 4, 8, 12], "algorithm": "tree",
                           "chunk_bytes": 256 << 10}}
    r, = run([load_config(base)])
    assert r.status == "done"
    s, bw = 8 << 20, 100e9 / 8
    # lower bound: the busiest NIC sends one buffer (S/2 per tree); pipelined over 16 chunks per tree
    assert s / bw < r.makespan_s < 2.2 * s / bw


def test_choose_algorithm():
    bw, lat = 50e9, 5e-6
    assert choose_algorithm("auto", "all_reduce", 256, 1 << 16, bw, lat) == "tree"
    assert choose_algorithm("auto", "all_reduce", 8, 1 << 30, bw, lat) == "ring"
    assert choose_algorithm("tree", "all_gather", 8, 1 << 10, bw, lat) == "ring"     # NCCL: trees reduce only
    assert choose_algorithm("tree", "all_reduce", 8, 1 << 30, bw, lat) == "tree"


def _intra(op, nbytes, gpus):
    return 1e-6 * gpus + nbytes / 100e9


def test_hierarchical_all_reduce_shape():
    b = TaskGraphBuilder()
    # 2 servers x 2 GPUs; members 0,1 on server 0 (hosts 0, 1), members 2,3 on server 1 (hosts 2, 3)
    done = add_group_collective(b, "all_reduce", [0, 1, 2, 3], [0, 0, 1, 1], 1_000_000, intra=_intra,
                                after={i: [] for i in range(4)})
    g = b.build()
    flows = np.nonzero(g.kind == FLOW)[0]
    # one inter-server ring per slot (2 hosts, 2 steps), on S/2: 0 <-> 2 and 1 <-> 3
    assert sorted({(int(g.src[f]), int(g.dst[f])) for f in flows}) == [(0, 2), (1, 3), (2, 0), (3, 1)]
    assert int(g.size_bytes[flows].sum()) == 4 * 2 * 250_000
    assert len(done) == 4 and all(len(v) == 1 for v in done.values())


def test_hierarchical_sampling_refuses_partial_network_collectives():
    b = TaskGraphBuilder()
    with pytest.raises(ConfigError, match="rail_sample"):
        add_group_collective(b, "all_reduce", [0, 1, 2, 3], [0, 1, 2, 3], 1000, intra=_intra,
                             kept=[True, False, True, False])
    # per-slot sampling is fine: slot 0 kept on both servers
    done = add_group_collective(b, "all_reduce", [0, 1, 2, 3], [0, 0, 1, 1], 1000, intra=_intra,
                                kept=[True, False, True, False])
    assert set(done) == {0, 2}


def test_flat_mixed_ring_uses_nvlink_inside_a_server():
    b = TaskGraphBuilder()
    add_group_collective(b, "all_gather", [0, 1, 2, 3], [0, 0, 1, 1], 4000, intra=_intra, hierarchical=False)
    g = b.build()
    flows = np.nonzero(g.kind == FLOW)[0]
    assert {(int(g.src[f]), int(g.dst[f])) for f in flows} == {(1, 2), (3, 0)}


@pytest.mark.parametrize("collective", [
    {"algorithm": "tree"}, {"algorithm": "auto"}, {"hierarchical": True}, {"hierarchical": True, "op": "reduce_scatter"},
])
def test_collective_workload_accepts_tree_and_hierarchical(collective):
    cfg = load_config({"cluster": {"topology": "rail_optimized", "servers": 4, "servers_per_group": 2,
                                   "gpus_per_server": 4, "gpu": "H100", "link_gbps": [400, 400]},
                       "network": {"cc": "none", "payload_bytes": 4096}, "workload": {"kind": "collective"},
                       "collective": {"bytes": 1 << 20, **collective}})
    exp = build_experiment(cfg)
    r, = run([cfg])
    assert r.status == "done" and exp.tasks.n > 0
