"""ASTRA-sim / SimAI workload files: parsing, errors with lines, groups, simulation."""

from __future__ import annotations

import pytest

from mvopt.build import build_experiment, evaluate, run
from mvopt.config import load_config
from mvopt.errors import InputFileError
from mvopt.io.astra import groups, parse_astra, read_astra

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
    ("DATA pp: 2\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 1, "pp: 2 is not supported"),
    ("DATA\nmany\n", 2, "number of layers"),
    ("DATA\n2\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", None, "announces 2 layers"),
    ("DATA\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0\n", 3, "12 fields"),
    ("DATA\n1\nx -1 1 BROADCAST 0 1 NONE 0 1 NONE 0 1\n", 3, "fwd_comm_type must be one of"),
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


def _cfg(tmp_path, text: str, **extra):
    f = tmp_path / "w.txt"
    f.write_text(text)
    return load_config({"cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "gpus_per_server": 4,
                                    "gpu": "A100", "link_gbps": [100, 100]},
                        "network": {"cc": "none", "payload_bytes": 4096},
                        "workload": {"kind": "astra", "file": str(f), **extra}})


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
