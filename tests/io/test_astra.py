"""ASTRA-sim / SimAI workload files: parsing, errors with lines, groups, simulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mvopt.build import build_experiment, evaluate, run
from mvopt.config import load_config
from mvopt.errors import InputFileError
from mvopt.engine.tasks import FLOW, TaskGraphBuilder
from mvopt.io.astra import astra_graph, comm_groups, groups, parse_astra, read_astra

DATA = Path(__file__).parent / "data"

GOOD = """HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 4 ep: 1 pp: 1 vpp: 8 ga: 2 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0
2
# a comment
attention -1 1000 ALLREDUCE 1048576 2000 ALLREDUCE 1048576 2000 NONE 0 100
mlp       -1 1500 ALLREDUCE 1048576 3000 ALLREDUCE 1048576 3000 ALLREDUCE 4194304 100
"""


def test_parse_header_options_and_layers():
    w = parse_astra(GOOD, "w.txt")
    assert w.policy == "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
    assert w.mp == 4 and w.ga == 2 and w.options["all_gpus"] == 8 and w.options["vpp"] == 8
    assert [layer.name for layer in w.layers] == ["attention", "mlp"]
    mlp = w.layers[1]
    assert (mlp.fwd_ns, mlp.fwd_comm, mlp.fwd_bytes) == (1500.0, "all_reduce", 1048576)
    assert (mlp.wg_comm, mlp.wg_bytes, mlp.update_ns) == ("all_reduce", 4194304, 100.0)
    assert w.layers[0].wg_comm is None


def test_plain_astra_1_header():
    w = parse_astra("DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1000 10\n")
    assert w.policy == "DATA" and w.mp == 1 and w.ga == 1


@pytest.mark.parametrize("text,line,match", [
    ("", None, "empty"),
    ("PIPELINE\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 1, "unknown parallelism policy"),
    ("DATA foo: 3\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 1, "unknown option"),
    ("DATA ga: x\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 1, "must be an integer"),
    ("DATA ep: 0\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 1, "'ep' must be a positive integer"),
    ("DATA\nmany\n", 2, "number of layers"),
    ("DATA\n2\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", None, "announces 2 layers"),
    ("DATA\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0\n", 3, "12 fields"),
    ("DATA\n1\nx -1 1 BROADCAST 0 1 NONE 0 1 NONE 0 1\n", 3, "fwd_comm_type must be one of"),
    ("DATA\n1\nx -1 1 ALLREDUCE_TP 0 1 NONE 0 1 NONE 0 1\n", 3, "fwd_comm_type must be one of"),
    ("DATA\n1\nx -1 1 NONE 0 1 NONE_EP 0 1 NONE 0 1\n", 3, "ig_comm_type must be one of"),
    ("DATA\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCEALLTOALL_EP 8 1\n", 3, "ALLREDUCEALLTOALL_EP.*not supported"),
    ("DATA\n1\nx -1 1 NONE 0 -4 NONE 0 1 NONE 0 1\n", 3, "ig_compute must be >= 0"),
    ("DATA\n1\nx -1 1 NONE 0 1 NONE 1.5 1 NONE 0 1\n", 3, "ig_comm_size must be a number"),
    ("DATA\n1\nx r 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 3, "reserved field"),
])
def test_bad_input_names_file_and_line(text, line, match):
    with pytest.raises(InputFileError, match=match) as e:
        parse_astra(text, "w.txt")
    assert e.value.file == "w.txt" and e.value.line == line


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError, match="cannot be read"):
        read_astra(tmp_path / "nope.txt")


def test_groups_by_policy():
    w = parse_astra(GOOD)
    mp, dp = groups(w, 8)
    assert mp == [[0, 1, 2, 3], [4, 5, 6, 7]] and dp == [[0, 4], [1, 5], [2, 6], [3, 7]]
    w2 = parse_astra(GOOD.replace("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_MODEL_DATA"))
    mp, dp = groups(w2, 8)
    assert dp == [[0, 1], [2, 3], [4, 5], [6, 7]] and mp == [[0, 2, 4, 6], [1, 3, 5, 7]]
    with pytest.raises(InputFileError, match="must divide"):
        groups(parse_astra(GOOD.replace("group: 4", "group: 3")), 8)


def _cfg(tmp_path, text: str, collective: dict | None = None, **extra):
    f = tmp_path / "w.txt"
    f.write_text(text)
    return load_config({"cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "gpus_per_server": 4,
                                    "gpu": "A100", "link_gbps": [100, 100]},
                        "network": {"cc": "none", "payload_bytes": 4096},
                        "workload": {"kind": "astra", "file": str(f), **extra},
                        **({"collective": collective} if collective else {})})


def test_data_parallel_workload_simulates_compute_plus_collectives(tmp_path):
    """DATA over 8 GPUs on 2 servers (4 each, one NIC per server): compute 5 + 5 + 5 us, then the
    weight-gradient all-reduce, hierarchical: NVLink reduce-scatter of S over 4 GPUs, one 2-server
    ring all-reduce of S/4 per GPU position (4 rings share the NIC: 2 steps of 4 x S/8 each way,
    ACKs of the reverse direction on the same link), NVLink all-gather of S; then the update."""
    from mvopt.comm import default_model

    size = 4194304
    text = f"DATA\n1\nlayer -1 5000 NONE 0 5000 NONE 0 5000 ALLREDUCE {size} 1000\n"
    r, = run([_cfg(tmp_path, text)])
    assert r.status == "done"
    intra = default_model()
    nv = intra.time_s("reduce_scatter", size, gpu="A100", gpus=4) + intra.time_s("all_gather", size, gpu="A100", gpus=4)
    ring = 2 * (4 * size / 8 * (4096 + 48 + 60) / 4096 / 12.5e9 + 2 * 1e-6 + (4096 + 48) / 12.5e9)
    assert r.makespan_s == pytest.approx(15e-6 + nv + ring + 1e-6, rel=0.01)


def test_hybrid_workload_runs_and_iterations_scale(tmp_path):
    one, = run([_cfg(tmp_path, GOOD)])
    two, = run([_cfg(tmp_path, GOOD, iterations=2)])
    assert one.status == two.status == "done"
    assert two.makespan_s == pytest.approx(2 * one.makespan_s, rel=0.05)
    exp = build_experiment(_cfg(tmp_path, GOOD))
    assert exp.tasks.n > 0


def test_bad_file_is_an_infeasible_evaluation(tmp_path):
    ev, = evaluate([_cfg(tmp_path, "DATA\n1\nx -1 1 NONE 0 1\n")])
    assert not ev.feasible and "w.txt:3" in ev.reason


def test_too_many_gpus(tmp_path):
    with pytest.raises(InputFileError, match="exceeds"):
        build_experiment(_cfg(tmp_path, GOOD.replace("all_gpus: 8", "all_gpus: 16")))


# --- SimAI workloads: group suffixes, pipelines, all-to-all -------------------------------------

MOE = """HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 2 pp: 2 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0 pp_comm 65536
3
attention -1 1000 ALLGATHER 65536 1000 REDUCESCATTER 65536 1000 ALLREDUCE 131072 100
moe       -1 2000 ALLTOALL_EP 131072 2000 ALLTOALL_EP 131072 1000 NONE 0 100
moe_grad  -1 1 NONE 0 1 NONE 0 1000 ALLREDUCE_DP_EP 262144 100
"""


def _flows(text: str, n: int = 8) -> tuple[int, int]:
    """(flows, bytes) of one iteration with every GPU on its own server and host."""
    b = TaskGraphBuilder()
    astra_graph(b, parse_astra(text), gpu_host=np.arange(n), gpus_per_server=1, intra=lambda op, size, k: 0.0)
    g = b.build()
    flow = g.kind == FLOW
    return int(flow.sum()), int(g.size_bytes[flow].sum())


def test_simai_micro_allreduce_example_round_trips():
    """SimAI's example/microAllReduce.txt: two forward all-reduces over one MP group of 8. A ring
    all-reduce over 8 GPUs on 8 servers is 2 x 7 steps of one S/8 flow per GPU: 112 flows, 14 S bytes."""
    w = read_astra(DATA / "simai_microAllReduce.txt")
    assert (w.policy, w.mp, w.ga, w.options["all_gpus"]) == ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", 8, 1, 8)
    assert [(la.fwd_comm, la.fwd_group, la.fwd_bytes) for la in w.layers] == [
        ("all_reduce", "mp", 16777216), ("all_reduce", "mp", 67108864)]
    assert comm_groups(w, 8)["mp"] == [list(range(8))]
    flows, nbytes = _flows((DATA / "simai_microAllReduce.txt").read_text())
    assert flows == 2 * 112 and nbytes == 14 * (16777216 + 67108864)


def test_simai_moe_example_header_and_suffixes():
    """SimAI's example/workload_analytical.txt (head): pp 12, ``pp_comm`` without a colon, MoE
    all-to-alls over EP groups and expert-gradient collectives over DP_EP groups."""
    w = read_astra(DATA / "simai_workload_analytical_head.txt")
    assert (w.mp, w.ep, w.options["pp"], w.options["pp_comm"], w.options["all_gpus"]) == (2, 16, 12, 50331648, 9216)
    assert len(w.layers) == 22
    by = {(la.name, la.fwd_comm, la.fwd_group, la.wg_comm, la.wg_group) for la in w.layers}
    assert ("moe_grad_norm1", None, "mp", "all_gather", "dp_ep") in by
    assert ("moe_grad_norm2", None, "mp", "reduce_scatter", "dp_ep") in by
    assert ("mlp_moelayer", "all_to_all", "ep", None, "dp") in by
    assert ("mlp_moelayer", "all_to_all", "mp", None, "dp") in by
    g = comm_groups(w, 9216)   # SimAI's packet loop: one stage, DP = all_gpus / mp
    assert [(len(g[k]), len(g[k][0])) for k in ("mp", "dp", "ep", "dp_ep")] == [(4608, 2), (2, 4608), (576, 16), (32, 288)]
    assert g["ep"][0] == list(range(0, 32, 2)) and g["dp_ep"][0][:3] == [0, 32, 64]


def test_ep_groups_are_packed_inside_dp():
    g = comm_groups(parse_astra(MOE), 8)
    assert g["mp"] == [[0, 1], [2, 3], [4, 5], [6, 7]] and g["dp"] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert g["ep"] == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert g["dp_ep"] == [[0, 4], [2, 6], [1, 5], [3, 7]]
    with pytest.raises(InputFileError, match=r"ep \(3\) must divide .* \(4\)"):
        comm_groups(parse_astra(MOE.replace("ep: 2", "ep: 3")), 8)


def test_moe_flows_by_hand():
    """Every GPU on its own server; sizes are per rank as in nccl-tests (all-gather: the gathered
    buffer). Forward: all-gather of 64 KiB over 4 MP pairs (one 32 KiB flow each way: 8 flows); all-to-all of 128 KiB over 4 EP pairs (64 KiB to the peer: 8 flows).
    Backward, reversed: moe_grad's all-reduce of 256 KiB over 4 DP_EP pairs (ring of 2: 2 steps of
    one 128 KiB flow per GPU: 16 flows); moe's all-to-all again (8 flows); attention's
    reduce-scatter of 64 KiB over the MP pairs (one 32 KiB flow per GPU: 8 flows) and all-reduce
    of 128 KiB over 2 DP groups of 4 (2 x 3 steps of one 32 KiB flow per GPU: 48 flows)."""
    k = 1024
    flows, nbytes = _flows(MOE)
    assert flows == 8 + 8 + 16 + 8 + 8 + 48
    assert nbytes == 8 * 32 * k + 8 * 64 * k + 16 * 128 * k + 8 * 64 * k + 8 * 32 * k + 48 * 32 * k


def test_pp_and_pp_comm_leave_the_graph_unchanged():
    """SimAI's packet-level loop runs one pipeline stage and issues no pipeline sends."""
    one = MOE.replace("pp: 2", "pp: 1").replace(" pp_comm 65536", "")
    assert _flows(one) == _flows(MOE)


def test_simai_pp2_moe_workload_simulates(tmp_path):
    r, = run([_cfg(tmp_path, MOE)])
    assert r.status == "done" and r.makespan_s > 0
    h, = run([_cfg(tmp_path, MOE, collective={"all_to_all": "hierarchical"})])
    assert h.status == "done" and h.makespan_s > 0
