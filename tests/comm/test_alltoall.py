"""All-to-all algorithms: flows and bytes by hand on small cases, and a run to the end."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.build import run
from mvopt.comm.alltoall import add_all_to_all, even_matrix, nccl_deltas, nccl_send_order, skewed_matrix
from mvopt.config import load_config
from mvopt.engine import DELAY, FLOW, TaskGraphBuilder
from mvopt.errors import ConfigError


def _intra(op, nbytes, gpus):
    assert op == "all_to_all"
    return 1e-9 * nbytes / gpus          # 1 ns per byte per GPU share: easy to check


def _graph(hosts, servers, matrix, algorithm, after=None):
    b = TaskGraphBuilder()
    done = add_all_to_all(b, hosts, servers, matrix, algorithm=algorithm, intra=_intra, after=after)
    return b.build(), done


def _flows(g):
    return [int(t) for t in np.nonzero(g.kind == FLOW)[0]]


def test_even_and_skewed_blocks():
    assert even_matrix(3, 10).tolist() == [[0, 3, 3], [4, 0, 3], [4, 3, 0]]   # block k = piece k
    m = skewed_matrix(4, 1200, 2.0)           # rank 0 gets 2/4 of every rank's tokens, the others 1/6
    assert m[:, 0].tolist() == [0, 600, 600, 600]
    assert m[0, 1:].tolist() == [200, 200, 200]
    assert (skewed_matrix(4, 1200, 1.0)[~np.eye(4, dtype=bool)] == 300).all()
    with pytest.raises(ConfigError, match="expert_skew"):
        skewed_matrix(4, 1200, 4.5)


def test_concurrent_one_member_per_server():
    m = even_matrix(4, 4000)
    g, done = _graph([0, 1, 2, 3], [0, 1, 2, 3], m, "concurrent")
    flows = _flows(g)
    assert len(flows) == 12 and g.pred.size == 0 and (g.size_bytes[flows] == 1000).all()
    assert {(int(g.src[t]), int(g.dst[t])) for t in flows} == {(a, b) for a in range(4) for b in range(4) if a != b}
    assert all(len(v) == 3 and all(int(g.dst[t]) == h for t in v) for h, v in done.items())


def test_nccl_round_order():
    # NCCL's p2pSchedule comment gives the sequence for 16 ranks
    assert nccl_deltas(16) == [0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8]
    assert nccl_deltas(5) == [0, 1, 3, 2, 4]          # of 0 1 3 6 2 7 5 4 (mod 8), those < 5
    for n in range(1, 20):
        assert sorted(nccl_deltas(n)) == list(range(n))
    # 2 servers x 2: server offset first, then local offset
    assert nccl_send_order([0, 0, 1, 1]) == [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    # uneven servers: flat rank offsets
    assert nccl_send_order([0, 0, 1]) == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def test_pairwise_one_peer_at_a_time_per_sender():
    n = 5
    m = np.arange(n * n).reshape(n, n) + 100
    np.fill_diagonal(m, 0)
    g, done = _graph(list(range(n)), list(range(n)), m, "pairwise")
    flows = _flows(g)
    assert len(flows) == n * (n - 1)
    # round r: i -> i + delta_r (NCCL's order), exactly the blocks of the matrix
    deltas = nccl_deltas(n)[1:]
    assert [(int(g.src[t]), int(g.dst[t])) for t in flows] == [(i, (i + d) % n) for d in deltas for i in range(n)]
    assert all(int(g.size_bytes[t]) == m[g.src[t], g.dst[t]] for t in flows)
    # a member's first send waits for nothing; each later one for its own previous send only
    for k, t in enumerate(flows):
        r, i = divmod(k, n)
        preds = g.preds_of(t).tolist()
        if r == 0:
            assert preds == []
        else:
            assert preds == [flows[(r - 1) * n + i]] and int(g.src[preds[0]]) == i
    assert all(len(v) == n - 1 for v in done.values())


def test_intra_server_blocks_are_one_nvlink_step_per_member():
    # 2 servers x 2 GPUs; hosts = NICs (one per GPU)
    m = even_matrix(4, 4000)
    g, done = _graph([0, 1, 2, 3], [0, 0, 1, 1], m, "pairwise")
    flows = _flows(g)
    delays = [int(t) for t in np.nonzero(g.kind == DELAY)[0]]
    assert len(delays) == 4 and len(flows) == 8          # no flow between two GPUs of a server
    assert all(g.duration_ps[t] == round(1e3 * 2 * 1000 / 2) for t in delays)   # intra(2 * 1000 B, 2 GPUs)
    assert sum(int(g.size_bytes[t]) for t in flows) == 8 * 1000
    assert all(len(v) == 3 for v in done.values())       # 1 NVLink step + 2 flows each


def test_hierarchical_goes_over_the_destinations_rail():
    k, gl = 3, 2                                         # 3 servers x 2 GPUs, member = server * 2 + local
    n = k * gl
    m = np.arange(n * n).reshape(n, n) * 10 + 7
    np.fill_diagonal(m, 0)
    g, done = _graph(list(range(n)), [i // gl for i in range(n)], m, "hierarchical")
    flows = _flows(g)
    delays = [int(t) for t in np.nonzero(g.kind == DELAY)[0]]
    assert len(delays) == n                              # phase 1: one NVLink step per member
    assert len(flows) == gl * k * (k - 1)                # phase 2: one flow per rail and server pair
    for t in flows:
        a, j = divmod(int(g.src[t]), gl)
        b, jj = divmod(int(g.dst[t]), gl)
        assert j == jj and a != b                        # stays on rail j
        # carries server a's blocks for (b, j): sum over its local GPUs i
        assert int(g.size_bytes[t]) == sum(int(m[a * gl + i, b * gl + j]) for i in range(gl))
        # waits for its own phase-1 step (on its host) and its previous send (from its host)
        assert all(int(g.dst[p]) == int(g.src[t]) if g.kind[p] == DELAY else int(g.src[p]) == int(g.src[t])
                   for p in g.preds_of(t))
    # every byte crossing servers is carried once
    cross = sum(int(m[i, j]) for i in range(n) for j in range(n) if i // gl != j // gl)
    assert sum(int(g.size_bytes[t]) for t in flows) == cross
    # phase 1 of (a, i) lasts intra(g * b): b = its largest block to or from a local peer
    rail = m.reshape(k, gl, k, gl).sum(axis=2)           # [a, i, j]
    for t in delays:
        a, i = divmod(int(g.src[t]), gl)
        b = max(rail[a, i, 1 - i], rail[a, 1 - i, i])
        assert g.duration_ps[t] == round(1e3 * b)       # intra(g * b, g) = 1 ns * b
    assert all(len(v) == 1 + (k - 1) for v in done.values())


def test_hierarchical_with_one_gpu_per_server_is_pairwise():
    m = even_matrix(4, 4000)
    a, _ = _graph([0, 1, 2, 3], [0, 1, 2, 3], m, "hierarchical")
    b, _ = _graph([0, 1, 2, 3], [0, 1, 2, 3], m, "pairwise")
    assert (a.src == b.src).all() and (a.dst == b.dst).all() and (a.pred == b.pred).all()


def test_after_gates_every_send_and_bad_algorithm():
    b = TaskGraphBuilder()
    c = [b.delay(0, 10), b.delay(0, 20)]
    add_all_to_all(b, [0, 1], [0, 1], even_matrix(2, 100), algorithm="concurrent", intra=_intra, after={0: c})
    g = b.build()
    f = [t for t in _flows(g) if g.src[t] == 0][0]
    gate = g.preds_of(f)
    assert len(gate) == 1 and set(g.preds_of(gate[0]).tolist()) == set(c)
    with pytest.raises(ConfigError, match="all_to_all"):
        add_all_to_all(TaskGraphBuilder(), [0, 1], [0, 1], even_matrix(2, 100), algorithm="ring", intra=_intra)


@pytest.mark.parametrize("algorithm", ["pairwise", "hierarchical"])
def test_collective_workload_all_to_all_runs(algorithm):
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none"},
                       "workload": {"kind": "collective"},
                       "collective": {"op": "all_to_all", "bytes": 64_000, "all_to_all": algorithm,
                                      "hosts": [0, 1, 2, 3]}})
    res, = run([cfg])
    assert res.status == "done" and res.makespan_ps > 0
