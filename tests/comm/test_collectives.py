"""Collectives as flows: structure of the decomposition, and the ring all-reduce closed form."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.build import build_experiment, run
from mvopt.comm.collectives import add_collective, add_collective_workload, ring_steps, split_bytes
from mvopt.config import load_config
from mvopt.engine import DELAY, FLOW, TaskGraphBuilder
from mvopt.engine.params import ser_ps
from mvopt.errors import ConfigError


def _graph(op, hosts, size, **kw):
    b = TaskGraphBuilder()
    done = add_collective(b, op, hosts, size, **kw)
    return b.build(), done


def _flows(g):
    return np.nonzero(g.kind == FLOW)[0]


def test_split_bytes_is_exact():
    assert split_bytes(10, 4) == [3, 3, 2, 2]
    assert sum(split_bytes(1_000_003, 16)) == 1_000_003


@pytest.mark.parametrize("op, steps", [("all_reduce", 6), ("all_gather", 3), ("reduce_scatter", 3)])
@pytest.mark.parametrize("channels", [1, 2])
def test_ring_structure(op, steps, channels):
    hosts = [3, 1, 0, 2]                       # ring order as given, not sorted
    n, size = len(hosts), 4000 * channels
    g, done = _graph(op, hosts, size, channels=channels)
    flows = _flows(g)
    assert ring_steps(op, n) == steps
    assert len(flows) == steps * n * channels and (g.kind != DELAY).all()
    # every flow goes to the rank's successor
    succ = {hosts[i]: hosts[(i + 1) % n] for i in range(n)}
    assert all(succ[int(g.src[t])] == int(g.dst[t]) for t in flows)
    # every rank sends exactly steps x size / n bytes (the algorithm's bus traffic)
    for h in hosts:
        assert g.size_bytes[g.src == h].sum() == steps * size // n
    # step 0 has no dependency; later flows wait for the flow INTO their source (local to it)
    first = [t for t in flows if g.preds_of(t).size == 0]
    assert len(first) == n * channels
    for t in flows:
        preds = g.preds_of(t)
        assert preds.size <= 1
        for p in preds:
            assert g.dst[p] == g.src[t] and g.src[p] != g.src[t]
    # completion tasks: per host, the flows it receives at the last step, one per channel
    for h, ts in done.items():
        assert len(ts) == channels and all(int(g.dst[t]) == h for t in ts)
    g.validate(4)


def test_ring_pieces_rotate_and_uneven_sizes_are_exact():
    size, hosts = 10_001, [0, 1, 2]
    g, _ = _graph("all_reduce", hosts, size)
    flows = _flows(g)
    # pieces 3334, 3334, 3333: each rank sends 2(n-1) pieces; total = 2(n-1) x size
    assert g.size_bytes[flows].sum() == 2 * (len(hosts) - 1) * size
    assert set(g.size_bytes[flows].tolist()) == {3334, 3333}


def test_chunk_pipelining():
    hosts, size, chunk, gap = [0, 1, 2, 3], 4 * 10_000, 3_000, 777
    g, _ = _graph("all_gather", hosts, size, chunk_bytes=chunk, chunk_gap_ps=gap)
    flows = _flows(g)
    # each step's 10_000 bytes in chunks 3000, 3000, 3000, 1000
    assert len(flows) == 3 * 4 * 4
    assert sorted(set(g.size_bytes[flows].tolist())) == [1000, 3000]
    # chunk j of step 0 waits for a delay of j x gap on its own host
    delays = np.nonzero(g.kind == DELAY)[0]
    assert sorted(set(g.duration_ps[delays].tolist())) == [gap, 2 * gap, 3 * gap]
    for t in flows:
        for p in g.preds_of(t):
            if g.kind[p] == DELAY:
                assert g.src[p] == g.src[t] and g.preds_of(p).size == 0
            else:   # chunk j of step s waits for chunk j of step s-1 received from the predecessor
                assert g.dst[p] == g.src[t] and g.size_bytes[p] == g.size_bytes[t]


def test_all_to_all_all_pairs_at_once():
    hosts = [0, 1, 2, 3, 4]
    g, done = _graph("all_to_all", hosts, 5_000, channels=2)
    flows = _flows(g)
    assert len(flows) == 5 * 4 * 2 and g.pred.size == 0
    assert {(int(g.src[t]), int(g.dst[t])) for t in flows} == {(a, b) for a in hosts for b in hosts if a != b}
    assert (g.size_bytes[flows] == 500).all()
    assert all(len(v) == 8 for v in done.values())


def test_after_dependencies_gate_every_send_of_a_rank():
    b = TaskGraphBuilder()
    c0 = b.delay(0, 5_000)
    c1a, c1b = b.delay(1, 1_000), b.delay(1, 2_000)
    add_collective(b, "all_reduce", [0, 1, 2], 3_000, after={0: [c0], 1: [c1a, c1b]})
    g = b.build()
    for t in _flows(g):
        preds = set(g.preds_of(t).tolist())
        if g.src[t] == 0:
            assert c0 in preds
        elif g.src[t] == 1:   # several `after` tasks: one zero-duration gate delay on host 1
            gate = [p for p in preds if g.kind[p] == DELAY]
            assert len(gate) == 1 and set(g.preds_of(gate[0]).tolist()) == {c1a, c1b}


@pytest.mark.parametrize("kwargs, path", [
    ({"hosts": [0, 1, 1]}, "collective.hosts"),
    ({"hosts": [0, 99]}, "collective.hosts[1]"),
    ({"hosts": [3]}, "collective.hosts"),
    ({"bytes": 15, "channels": 1}, "collective.bytes"),
    ({"algorithm": "tree"}, "collective.algorithm"),
    ({"hierarchical": True}, "collective.hierarchical"),
])
def test_invalid_collectives(kwargs, path):
    cfg = load_config({"workload": {"kind": "collective"}, "collective": kwargs}).collective
    with pytest.raises(ConfigError) as e:
        add_collective_workload(TaskGraphBuilder(), cfg, 16)
    assert e.value.path == path


# --------------------------------------------------------------------------- closed form


def _path_ports(topo, src, dst):
    port, ports = int(topo.node_port_offset[src]), []
    while True:
        ports.append(port)
        node = int(topo.port_peer_node[port])
        if node == dst:
            return ports
        port = int(topo.next_hop_ports(node, dst)[0])


def _flow_time(topo, src, dst, size, payload, header):
    """Start to last byte delivered of one flow alone on its path (store and forward, exact)."""
    ports = _path_ports(topo, src, dst)
    n = -(-size // payload)
    free = [0] * len(ports)
    arrival = 0
    for b in [payload] * (n - 1) + [size - payload * (n - 1)]:
        t = 0
        for i, p in enumerate(ports):
            start = max(t, free[i])
            free[i] = start + ser_ps(b + header, int(topo.port_rate_bps[p]))
            t = free[i] + int(topo.port_delay_ps[p])
        arrival = t
    return arrival


def _ring_closed_form(topo, hosts, size, steps, payload=1000, header=48):
    """Rank r's step-s send starts when its step-(s-1) receipt ends: F(s, r) = F(s-1, r-1) + D(r)."""
    n = len(hosts)
    piece = size // n
    d = [_flow_time(topo, hosts[r], hosts[(r + 1) % n], piece, payload, header) for r in range(n)]
    f = [0] * n
    for _ in range(steps):
        f = [f[(r - 1) % n] + d[r] for r in range(n)]
    return max(f), d


@pytest.mark.parametrize("hosts", [None, [0, 4, 8, 12]])
def test_ring_all_reduce_closed_form_k4_fat_tree(hosts):
    """Idle network, cc none: the all-reduce time is the sum of the per-step flow times along
    the dependency chain. The only interaction the closed form leaves out is the ACKs of the
    flow a rank receives sharing that rank's uplink (and switch ports) with the data it sends;
    with 1-byte ACKs each ACK delays data by at most ser(1 B) = 80 ps per hop, which bounds the
    difference. A wrong dependency would be off by whole flow times (~ 10 us)."""
    size = 1 << 20
    coll = {"op": "all_reduce", "bytes": size}
    if hosts is not None:
        coll["hosts"] = hosts
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none", "ack_bytes": 1},
                       "workload": {"kind": "collective"}, "collective": coll})
    exp = build_experiment(cfg)
    topo = exp.topology
    ring = list(range(topo.n_host)) if hosts is None else hosts
    n = len(ring)
    steps = 2 * (n - 1)
    expected, d = _ring_closed_form(topo, ring, size, steps)
    if hosts is not None:      # one host per pod: every step is a 6-hop flow, the same time
        assert len(set(d)) == 1 and expected == steps * d[0]
    result, = run([cfg])
    assert result.status == "done"
    packets_per_step = -(-(size // n) // 1000)
    bound = steps * packets_per_step * 6 * ser_ps(1, 100 * 10**9)
    assert expected <= result.makespan_ps <= expected + bound, (result.makespan_ps, expected, bound)


def test_chunking_pipelines_the_ring():
    """Without chunks every ring step pays the path latency (6 hops x 1 us) on top of its
    serialization; with chunks the ring stays busy and only the first chunk's latency is left."""
    size, ring = 2 << 20, [0, 4, 8, 12]
    base = {"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none", "ack_bytes": 1},
            "workload": {"kind": "collective"}, "collective": {"bytes": size, "hosts": ring}}
    whole, = run([load_config(base)])
    chunked, = run([load_config(base, collective__chunk_bytes=64 * 1024)])
    assert whole.status == chunked.status == "done"
    steps, piece = 2 * (len(ring) - 1), size // len(ring)
    wire = piece + -(-piece // 1000) * 48
    busy = steps * ser_ps(wire, 100 * 10**9)          # the sender's link never idles
    assert whole.makespan_ps > busy + steps * 6_000_000
    assert busy < chunked.makespan_ps < busy + 10_000_000


class _OneByOne:
    """A builder without the bulk method: add_collective takes its general loop."""

    def __init__(self) -> None:
        self.b = TaskGraphBuilder()

    def flow(self, *a, **k):
        return self.b.flow(*a, **k)

    def delay(self, *a, **k):
        return self.b.delay(*a, **k)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("n,channels,size,chunk", [(2, 1, 1000, None), (5, 2, 10_007, None), (7, 3, 99_999, 50_000),
                                                   (16, 1, 2**20, None)])
def test_bulk_ring_is_the_general_loop(op, n, channels, size, chunk):
    """The bulk path (a builder with flows()) builds exactly the tasks, ids, dependencies and
    completion sets of the one-by-one loop, with and without `after` tasks (one or several per
    rank)."""
    hosts = [(3 * i + 1) % 17 for i in range(n)]
    for after in (None, {hosts[0]: [0], hosts[-1]: [0, 1]}):
        graphs, dones = [], []
        for builder in (TaskGraphBuilder(), _OneByOne()):
            raw = builder if isinstance(builder, TaskGraphBuilder) else builder.b
            raw.delay(0, 5)
            raw.delay(1, 7)
            dones.append(add_collective(builder, op, hosts, size, channels=channels, chunk_bytes=chunk, after=after))
            graphs.append(raw.build())
        a, b = graphs
        assert dones[0] == dones[1]
        for field in ("kind", "src", "dst", "size_bytes", "duration_ps", "start_ps", "pred_offset", "pred", "category"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), field
