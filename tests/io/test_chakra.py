"""Chakra execution traces: the message definition, ASTRA-sim's example traces and generated ones
mapped onto task graphs (flows, bytes, dependencies by hand), refusals, simulation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mvopt.build import build_experiment, evaluate, run
from mvopt.config import config_to_dict, load_config
from mvopt.engine.tasks import DELAY, FLOW, TaskGraphBuilder
from mvopt.errors import ConfigError, InputFileError
from mvopt.io.chakra import chakra_graph, parse_chakra, read_chakra
from mvopt.io.chakra_proto import PROTO_PATH, encode_messages, file_descriptor, messages, split_messages

DATA = Path(__file__).parent / "data" / "chakra"
M = messages()
MiB = 1 << 20

# sha256 of the FileDescriptorProto that protoc 35.1 (grpcio-tools 1.85.1) serialises from the
# vendored chakra_et_def.proto: the reader's own parse of the file must give the same descriptor
PROTOC_DESCRIPTOR_SHA256 = "ed6d84108261ddeeecd82fc8098b817a80574dada7d85b33cf2843f490fb182a"


def test_descriptor_is_protocs():
    fd = file_descriptor(PROTO_PATH.read_text(encoding="utf-8"))
    assert hashlib.sha256(fd.SerializeToString()).hexdigest() == PROTOC_DESCRIPTOR_SHA256
    assert M.NodeType["COMM_COLL_NODE"] == 7 and M.CollectiveCommType["ALL_TO_ALL"] == 6


def test_framing_round_trip():
    nodes = [M.Node(id=i, name=f"n{i}", type=M.NodeType["COMP_NODE"], duration_micros=i) for i in range(300)]
    blob = encode_messages([M.GlobalMetadata(version="0.0.4")] + nodes)
    parts = split_messages(blob)
    assert len(parts) == 301
    back = M.Node()
    back.ParseFromString(parts[-1])
    assert back.duration_micros == 299 and back.name == "n299"
    with pytest.raises(ValueError, match="announces"):
        split_messages(blob[:-3])


def _graph(trace, *, gpus: int, gpus_per_server: int = 1, iterations: int = 1, flop_s=lambda f: f / 1e15):
    b = TaskGraphBuilder()
    info = chakra_graph(b, trace, gpu_host=list(range(gpus)) if gpus_per_server == 1 else
                        [g // gpus_per_server for g in range(gpus)], gpus_per_server=gpus_per_server,
                        intra=lambda op, nbytes, g: 1e-6, flop_s=flop_s, iterations=iterations)
    return b.build(), info


def _flows(g):
    f = g.kind == FLOW
    return list(zip(g.src[f].tolist(), g.dst[f].tolist(), g.size_bytes[f].tolist()))


@pytest.mark.parametrize("name,flows", [
    ("all_reduce", 4 * 2 * 3),      # ring: 2 (n - 1) steps per rank of S / n
    ("all_gather", 4 * 3),          # n - 1 steps of S / n (S: the gathered output)
    ("reduce_scatter", 4 * 3),
    ("all_to_all", 4 * 3),          # every rank to every other: S / n each
])
def test_astra_sim_microbenchmarks(name, flows):
    tr = read_chakra(DATA / name)
    assert tr.n == 4
    assert all(len(r) == 1 and r[0].kind == "coll" and r[0].size == MiB for r in tr.ranks)
    g, info = _graph(tr, gpus=4)
    assert info["coll"] == 1
    fl = _flows(g)
    assert len(fl) == flows and {s for _, _, s in fl} == {MiB // 4}
    if name == "all_to_all":
        assert sorted((s, d) for s, d, _ in fl) == [(s, d) for s in range(4) for d in range(4) if s != d]


def test_custom_ring_allreduce_send_recv_and_compute():
    """ASTRA-sim's MSCCL ring all-reduce (gzip): every rank sends 14 blocks of 128 KiB to the next
    rank, receives 14 from the previous, and reduces 7 times for 7 us after a receive."""
    tr = read_chakra(DATA / "custom_allreduce")
    assert tr.n == 8
    g, info = _graph(tr, gpus=8)
    assert info["p2p"] == 8 * 14 and info["comp"] == 8 * 7
    fl = _flows(g)
    assert len(fl) == 112 and {s for _, _, s in fl} == {131072}
    assert sorted({(s, d) for s, d, _ in fl}) == [(r, (r + 1) % 8) for r in range(8)]
    comp = (g.kind == DELAY) & (g.duration_ps > 0)
    assert comp.sum() == 56 and set(g.duration_ps[comp].tolist()) == {7_000_000}
    # rank 0's second send (node 3) waits for its first reduction (node 2, 7 us on host 0), which
    # waits for its first receive from rank 7 (node 1) and so for rank 7's first flow to rank 0
    sends0 = [t for t in range(g.n) if g.kind[t] == FLOW and g.src[t] == 0]
    second = sends0[1]
    red, = g.preds_of(second)
    assert g.kind[red] == DELAY and g.duration_ps[red] == 7_000_000 and g.src[red] == 0
    recv, = g.preds_of(red)            # the receive: its flow joined with its own dependency (the first send)
    assert sorted((int(g.src[p]), int(g.dst[p])) for p in g.preds_of(recv)) == [(0, 1), (7, 0)]


def _node(i, kind, deps=(), ctrl=(), dur=0, **attrs):
    n = M.Node(id=i, name=f"n{i}", type=M.NodeType[kind], data_deps=list(deps), ctrl_deps=list(ctrl),
               duration_micros=dur)
    for k, v in attrs.items():
        a = n.attr.add(name=k)
        if isinstance(v, str):
            a.string_val = v
        elif isinstance(v, list):
            a.bool_list.values.extend(v)
        elif k in ("comm_src", "comm_dst", "comm_tag"):
            a.int32_val = v
        else:
            a.int64_val = v
    return n


def _blob(*nodes):
    return encode_messages([M.GlobalMetadata(version="0.0.4")] + list(nodes))


COLL = M.NodeType["COMM_COLL_NODE"]
AR, A2A, BC = (M.CollectiveCommType[k] for k in ("ALL_REDUCE", "ALL_TO_ALL", "BROADCAST"))


def _two_rank_trace():
    """Rank 0: compute 5 us -> send 4096 B to rank 1 (tag 3) -> all-to-all of 8 KiB over
    communicator "7" -> compute of 2e9 FLOPs (ctrl-dep on the send). Rank 1: invalid node ->
    receive -> all-to-all -> compute 1 us."""
    r0 = _blob(_node(10, "COMP_NODE", dur=5),
               _node(11, "COMM_SEND_NODE", deps=[10], comm_dst=1, comm_size=4096, comm_tag=3),
               _node(12, "COMM_COLL_NODE", deps=[11], comm_type=A2A, comm_size=8192, pg_name="7"),
               _node(13, "COMP_NODE", deps=[12], ctrl=[11], num_ops=2_000_000_000))
    r1 = _blob(_node(0, "INVALID_NODE"),
               _node(1, "COMM_RECV_NODE", deps=[0], comm_src=0, comm_size=4096, comm_tag=3),
               _node(2, "COMM_COLL_NODE", deps=[1], comm_type=A2A, comm_size=8192, pg_name="7"),
               _node(3, "COMP_NODE", deps=[2], dur=1))
    return parse_chakra([r0, r1], ["t.0.et", "t.1.et"], {"7": [0, 1]})


def test_generated_trace_by_hand():
    g, info = _graph(_two_rank_trace(), gpus=2, flop_s=lambda f: f / 1e15)   # 2e9 FLOPs at 1 PFLOP/s: 2 us
    assert (info["comp"], info["p2p"], info["coll"]) == (3, 1, 1)
    fl = _flows(g)
    assert fl == [(0, 1, 4096), (0, 1, 4096), (1, 0, 4096)]          # the send, then the all-to-all's 8192 / 2
    kinds = g.kind.tolist()
    c5 = next(t for t in range(g.n) if kinds[t] == DELAY and g.duration_ps[t] == 5_000_000)
    send = next(t for t in range(g.n) if kinds[t] == FLOW)
    assert list(g.preds_of(send)) == [c5]
    a2a = [t for t in range(g.n) if kinds[t] == FLOW][1:]
    assert list(g.preds_of(a2a[0])) == [send]                           # rank 0's part waits for its send
    rank1_ready = g.preds_of(a2a[1])                                   # rank 1's: its receive (send joined)
    assert send in rank1_ready.tolist() or any(send in g.preds_of(p).tolist() for p in rank1_ready)
    flops = next(t for t in range(g.n) if kinds[t] == DELAY and g.duration_ps[t] == 2_000_000)
    deps = set(g.preds_of(flops).tolist())
    inner = set().union(*(set(g.preds_of(p).tolist()) for p in deps)) | deps
    assert send in inner and a2a[1] in inner                           # ctrl dep on the send, data dep on the a2a
    assert g.src[flops] == 0


def test_iterations_chain_passes():
    one, _ = _graph(_two_rank_trace(), gpus=2)
    two, _ = _graph(_two_rank_trace(), gpus=2, iterations=2)
    assert len(_flows(two)) == 2 * len(_flows(one))
    # the second pass's first compute (5 us on rank 0) waits for rank 0's end of the first pass
    c5 = [t for t in range(two.n) if two.kind[t] == DELAY and two.duration_ps[t] == 5_000_000]
    assert len(c5) == 2 and len(two.preds_of(c5[0])) == 0 and len(two.preds_of(c5[1])) == 1


def test_broadcast_ring_pieces():
    """Broadcast of 3 MiB over 3 ranks on 3 servers: 3 pieces of 1 MiB, each forwarded 0 -> 1 -> 2."""
    blobs = [_blob(_node(0, "COMM_COLL_NODE", comm_type=BC, comm_size=3 * MiB)) for _ in range(3)]
    g, _ = _graph(parse_chakra(blobs, ["b.0.et", "b.1.et", "b.2.et"]), gpus=3)
    fl = _flows(g)
    assert sorted(fl) == [(0, 1, MiB)] * 3 + [(1, 2, MiB)] * 3
    flows = [t for t in range(g.n) if g.kind[t] == FLOW]
    hop1, hop2 = flows[:3], flows[3:]
    assert list(g.preds_of(hop1[1])) == [hop1[0]]                      # piece 1 after piece 0 left rank 0
    assert sorted(g.preds_of(hop2[1]).tolist()) == [hop1[1], hop2[0]]  # has piece 1, sent piece 0


def test_collective_inside_a_server_is_nvlink():
    blobs = [_blob(_node(0, "COMM_COLL_NODE", comm_type=AR, comm_size=MiB)) for _ in range(4)]
    g, _ = _graph(parse_chakra(blobs, [f"s.{r}.et" for r in range(4)]), gpus=4, gpus_per_server=4)
    assert _flows(g) == [] and set(g.duration_ps.tolist()) == {1_000_000}


COMP = dict(kind="COMP_NODE", dur=1)


@pytest.mark.parametrize("ranks,groups,match", [
    ([[_node(0, "MEM_LOAD_NODE")]], None, "node 0 'n0': MEM_LOAD_NODE is not supported"),
    ([[_node(0, "METADATA_NODE")]], None, "METADATA_NODE is not supported.*comm_groups"),
    ([[_node(0, "COMM_COLL_NODE", comm_type=M.CollectiveCommType["REDUCE"], comm_size=8)]], None,
     "collective REDUCE is not supported"),
    ([[_node(0, "COMM_COLL_NODE", comm_type=42, comm_size=8)]], None, "collective comm_type 42 is not supported"),
    ([[_node(0, "COMM_COLL_NODE", comm_type=AR)]], None, "missing the attribute 'comm_size'"),
    ([[_node(0, "COMM_COLL_NODE", comm_size=8)]], None, "missing the attribute 'comm_type'"),
    ([[_node(0, "COMM_COLL_NODE", comm_type=AR, comm_size=8, involved_dim=[True, False])]], None, "involved_dim"),
    ([[_node(0, "COMM_COLL_NODE", comm_type=AR, comm_size=8, pg_name="5")]], None, "pg_name '5' is not in"),
    ([[_node(0, "COMP_NODE", deps=[9])]], None, "depends on node 9, which the file does not hold"),
    ([[_node(0, "COMP_NODE"), _node(0, "COMP_NODE")]], None, "node id 0 appears twice"),
    ([[_node(0, "COMM_SEND_NODE", comm_size=8)]], None, "missing the attribute 'comm_dst'"),
    ([[_node(0, "COMM_SEND_NODE", comm_dst=0, comm_size=8)]], None, "peer rank 0 must be another rank"),
    ([[_node(0, "COMM_SEND_NODE", comm_src=1, comm_dst=1, comm_size=8)], []], None,
     "a send of rank 0's file names rank 1 as its source"),
])
def test_refused_by_name(ranks, groups, match):
    n = max(2, len(ranks))
    blobs = [_blob(*(ranks[r] if r < len(ranks) else [])) for r in range(n)]
    with pytest.raises(InputFileError, match=match):
        parse_chakra(blobs, [f"t.{r}.et" for r in range(n)], groups)


def _mapping_error(r0, r1, match, groups=None):
    tr = parse_chakra([_blob(*r0), _blob(*r1)], ["t.0.et", "t.1.et"], groups)
    with pytest.raises(InputFileError, match=match):
        _graph(tr, gpus=2)


def test_unmatched_and_inconsistent_communication_refused():
    send = _node(0, "COMM_SEND_NODE", comm_dst=1, comm_size=8)
    _mapping_error([send], [], "1 send.*from rank 0 to rank 1 with tag 0 but 0 matching receive")
    _mapping_error([send], [_node(0, "COMM_RECV_NODE", comm_src=0, comm_size=16)], "receives 16 B but the matching send")
    ar = _node(0, "COMM_COLL_NODE", comm_type=AR, comm_size=8)
    _mapping_error([ar], [_node(0, "COMM_COLL_NODE", comm_type=AR, comm_size=16)], "all_reduce of 16 B here but")
    _mapping_error([ar], [], "issue different numbers of collectives")
    # rank 0 receives before it sends, rank 1 likewise: a deadlock
    recv = _node(0, "COMM_RECV_NODE", comm_src=1, comm_size=8)
    snd = _node(1, "COMM_SEND_NODE", deps=[0], comm_dst=1, comm_size=8)
    _mapping_error([recv, snd], [_node(0, "COMM_RECV_NODE", comm_src=0, comm_size=8),
                                 _node(1, "COMM_SEND_NODE", deps=[0], comm_dst=0, comm_size=8)], "cycle")


def test_files_and_groups_errors(tmp_path):
    with pytest.raises(InputFileError, match="no Chakra trace .*nothing.0.et"):
        read_chakra(tmp_path / "nothing")
    (tmp_path / "x.0.et").write_bytes(b"\x05ab")
    with pytest.raises(InputFileError, match="x.0.et: not a Chakra ET file"):
        read_chakra(tmp_path / "x")
    (tmp_path / "x.0.et").write_bytes(_blob(_node(0, "COMP_NODE")))
    (tmp_path / "g.json").write_text(json.dumps({"1": [0, 3]}))
    with pytest.raises(InputFileError, match="g.json: communicator '1' must list distinct ranks in 0..0"):
        read_chakra(tmp_path / "x", tmp_path / "g.json")


def _cfg(tmp_path, prefix, **workload):
    return load_config({"cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": 8, "gpus_per_server": 1,
                                    "gpu": "A100", "link_gbps": [100, 100]},
                        "network": {"cc": "none", "payload_bytes": 4096},
                        "workload": {"kind": "chakra", "file": str(prefix), **workload}})


def test_custom_allreduce_simulates():
    """8 ranks on one leaf, 100 Gb/s, 1 us links: 14 ring steps of 128 KiB (32 packets) and 7
    reductions of 7 us on the critical path. A step: the 32 packets on the sender's uplink,
    which also carries the ACKs of the flow it receives, the last packet again at the leaf, two
    link delays, and one window (1 us) for the receive to learn that its rank's send, which
    finishes on the next rank's host, is done."""
    r, = run([_cfg(None, DATA / "custom_allreduce")])
    assert r.status == "done"
    step = 32 * (4096 + 48 + 60) / 12.5e9 + (4096 + 48) / 12.5e9 + 2e-6 + 1e-6
    assert r.makespan_s == pytest.approx(14 * step + 7 * 7e-6, rel=0.01)
    two, = run([_cfg(None, DATA / "custom_allreduce", iterations=2)])
    assert two.makespan_s == pytest.approx(2 * r.makespan_s, rel=0.01)
    cfg = _cfg(None, DATA / "custom_allreduce")
    flow, = run([load_config(dict(config_to_dict(cfg), simulation={"fidelity": "flow"}))])
    assert flow.extra["fidelity"] == "flow" and flow.makespan_s == pytest.approx(r.makespan_s, rel=0.01)


def test_config_wiring(tmp_path):
    exp = build_experiment(_cfg(tmp_path, DATA / "all_to_all"))
    assert int((exp.tasks.kind == FLOW).sum()) == 12
    with pytest.raises(ConfigError, match="workload.comm_groups.*kind 'chakra' only"):
        load_config({"workload": {"kind": "astra", "file": "w.txt", "comm_groups": "g.json"}})
    with pytest.raises(ConfigError, match="workload.file.*required for kind 'chakra'"):
        load_config({"workload": {"kind": "chakra"}})
    ev, = evaluate([_cfg(tmp_path, tmp_path / "missing")])
    assert not ev.feasible and "no Chakra trace" in ev.reason
