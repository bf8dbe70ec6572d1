"""HPCC ns-3 files: flow.txt and config.txt readers, fct.txt writer, and every bad input."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from mvopt.build import run
from mvopt.cluster import read_hpcc_topology
from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder
from mvopt.engine.params import ser_ps
from mvopt.errors import InputFileError
from mvopt.io import hpcc
from mvopt.io.hpcc import (HpccConfigWarning, add_hpcc_flows, format_fct, node_ip, parse_data_rate, read_hpcc_config,
                           read_hpcc_flows, sports, write_fct)

# hosts 0, 1, 2 on switch 3 (100 Gb/s, 1 us)
TOPO = "4 1 3\n3\n0 3 100Gbps 1us 0\n1 3 100Gbps 1us 0\n2 3 100Gbps 1us 0\n"
FLOWS = """3
0 1 3 100 2500 0.000001
0 2 3 200 1000 0.000001000001
2 1 0 100 1 1
"""
G100 = 100 * 10**9


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _raises_at(fn, file, line, match):
    with pytest.raises(InputFileError) as e:
        fn()
    assert (e.value.file, e.value.line) == (file, line), str(e.value)
    assert f"{file}:{line}: " in str(e.value) if line else str(e.value).startswith(file)
    assert match in str(e.value), str(e.value)


# ------------------------------------------------------------------------------------ flow.txt


def test_read_flows(tmp_path):
    flows = read_hpcc_flows(_write(tmp_path, "flow.txt", FLOWS))
    assert [(f.src, f.dst, f.priority, f.dport, f.size_bytes) for f in flows] == \
        [(0, 1, 3, 100, 2500), (0, 2, 3, 200, 1000), (2, 1, 0, 100, 1)]
    assert [f.start_ps for f in flows] == [1_000_000, 1_000_001, 10**12]   # exact decimal seconds
    assert [f.line for f in flows] == [2, 3, 4]
    assert sports(flows) == [10000, 10000, 10000]                          # per host pair, file order
    again = flows + [flows[0], flows[2]]
    assert sports(again) == [10000, 10000, 10000, 10001, 10001]


@pytest.mark.parametrize("text, line, match", [
    ("", None, "empty file"),
    ("x\n", 1, "cannot parse number of flows"),
    ("2 3\n0 1 3 100 10 0\n", 1, "only the number of flows"),
    ("3\n0 1 3 100 10 0\n0 1 3 100 10 0\n", 3, "has 2 flow lines, the first line says 3"),
    ("1\n0 1 3 100 10 0\n0 1 3 100 10 0\n", 3, "has 2 flow lines, the first line says 1"),
    ("1\n0 1 3 100 10\n", 2, "6 fields"),
    ("1\n0 1 3 100 -5 0\n", 2, "negative size -5"),
    ("1\n0 1 3 100 0 0\n", 2, "size must be > 0"),
    ("1\n0 1 3 100 ten 0\n", 2, "cannot parse size 'ten'"),
    ("1\n0 1 3 100 10 soon\n", 2, "cannot parse start time 'soon'"),
    ("1\n0 1 3 100 10 -1\n", 2, "negative start time"),
    ("1\n0 0 3 100 10 0\n", 2, "same node"),
    ("1\n-1 0 3 100 10 0\n", 2, "unknown node id -1"),
    ("1\n0 1 3 70000 10 0\n", 2, "dport"),
    ("2\n0 1 3 100 10 0\n\n0 1 3 100 1.5 0\n", 4, "cannot parse size '1.5'"),
])
def test_bad_flow_files(tmp_path, text, line, match):
    path = _write(tmp_path, "flow.txt", text)
    _raises_at(lambda: read_hpcc_flows(path), path, line, match)


def test_missing_flow_file(tmp_path):
    path = str(tmp_path / "nope.txt")
    _raises_at(lambda: read_hpcc_flows(path), path, None, "cannot be read")


@pytest.mark.parametrize("flow, match", [("0 7 3 100 10 0", "dst: unknown node id 7 (the topology has nodes 0..3)"),
                                         ("3 0 3 100 10 0", "src: node 3 is a switch, not a host")])
def test_flow_node_ids_checked_against_topology(tmp_path, flow, match):
    topo = read_hpcc_topology(_write(tmp_path, "topo.txt", TOPO))
    path = _write(tmp_path, "flow.txt", f"2\n0 1 3 100 10 0\n{flow}\n")
    flows = read_hpcc_flows(path)
    _raises_at(lambda: add_hpcc_flows(TaskGraphBuilder(), flows, topo, path), path, 3, match)


def test_file_node_ids_are_mapped(tmp_path):
    # switch listed as node 0: mvopt numbers hosts first, flows keep the file's ids
    topo = read_hpcc_topology(_write(tmp_path, "topo.txt", "3 1 2\n0\n1 0 10Gbps 1us 0\n0 2 10Gbps 1us 0\n"))
    flows = read_hpcc_flows(_write(tmp_path, "flow.txt", "1\n2 1 3 100 10 0\n"))
    b = TaskGraphBuilder()
    add_hpcc_flows(b, flows, topo)
    g = b.build()
    assert (int(g.src[0]), int(g.dst[0])) == (1, 0)     # file node 2 is mvopt host 1, file 1 is host 0
    assert format_fct(flows, _FakeResult([5000], [7000])).split()[:2] == [f"{node_ip(2):08x}", f"{node_ip(1):08x}"]


# ------------------------------------------------------------------------------------ fct.txt


class _FakeResult:
    def __init__(self, fct, standalone, start=None):
        n = len(fct)
        self.flow_ids = np.arange(n)
        self.flow_fct_ps = np.asarray(fct, np.int64)
        self.flow_standalone_ps = np.asarray(standalone, np.int64)
        self.task_start_ps = np.asarray(start if start is not None else [0] * n, np.int64)


def test_node_ip_encoding():
    assert node_ip(0) == 0x0B000001
    assert node_ip(5) == 0x0B000501              # HPCC's examples: 10.0.5.1
    assert node_ip(345) == 0x0B015901            # 10.1.89.1
    assert f"{node_ip(1):08x}" == "0b000101"


def test_fct_file_end_to_end(tmp_path):
    """fct.txt of a real run: IPs, ports, sizes, start, FCT until the last ACK, standalone."""
    topo_p = _write(tmp_path, "topo.txt", TOPO)
    flow_p = _write(tmp_path, "flow.txt", FLOWS)
    cfg = load_config({"cluster": {"topology": "file", "topology_file": topo_p}, "network": {"cc": "none"},
                       "workload": {"kind": "hpcc_flows", "file": flow_p}})
    result, = run([cfg])
    flows = read_hpcc_flows(flow_p)
    out = tmp_path / "fct.txt"
    assert write_fct(out, flows, result) == 3
    rows = [ln.split() for ln in out.read_text().splitlines()]
    assert [r[:6] for r in rows] == [
        ["0b000001", "0b000101", "10000", "100", "2500", "1000"],
        ["0b000001", "0b000201", "10000", "200", "1000", "1000"],   # 1000.001 ns rounds to 1000
        ["0b000201", "0b000101", "10000", "100", "1", "1000000000"],   # 1 s
    ]
    # flow 2 (1 byte, alone at t = 1 s): 2 hops store-and-forward, then the ACK's 2 hops back
    ser, d = ser_ps(1 + 48, G100), 1_000_000
    fct = 2 * (ser + d) + 2 * (ser_ps(60, G100) + d)
    assert int(rows[2][6]) == (fct + 500) // 1000 == int(result.flow_fct_ps[2] + 500) // 1000
    assert [int(r[7]) for r in rows] == [(int(s) + 500) // 1000 for s in result.flow_standalone_ps]


def test_fct_leaves_out_unfinished_flows(tmp_path):
    flows = read_hpcc_flows(_write(tmp_path, "flow.txt", FLOWS))
    text = format_fct(flows, _FakeResult([1500, -1, 2499], [1000, 1000, 1000], [0, 0, 10**12]))
    assert [ln.split()[6] for ln in text.splitlines()] == ["2", "2"]     # ns, rounded to nearest


def test_fct_written_atomically(tmp_path, monkeypatch):
    flows = read_hpcc_flows(_write(tmp_path, "flow.txt", FLOWS))
    out = tmp_path / "fct.txt"
    with pytest.raises(ValueError):                        # wrong result: nothing written
        write_fct(out, flows, _FakeResult([1], [1]))
    assert not out.exists()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(hpcc.os, "replace", broken_replace)
    with pytest.raises(InputFileError, match="cannot be written"):
        write_fct(out, flows, _FakeResult([1, 2, 3], [1, 1, 1]))
    assert sorted(os.listdir(tmp_path)) == ["flow.txt"]  # no partial file, no temp file left


# ------------------------------------------------------------------------------------ config.txt

FULL_CONFIG = """\
ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE 1000
TOPOLOGY_FILE mix/topology.txt
FLOW_FILE mix/flow.txt
SIMULATOR_STOP_TIME 4.00
CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 300
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 20Mb/s
RATE_HAI 200Mb/s
MIN_RATE 100Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 0
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 0
GLOBAL_T 1
VAR_WIN 0
FAST_REACT 1
U_TARGET 0.95
MI_THRESH 5
INT_MULTI 1
ACK_HIGH_PRIO 1
KMAX_MAP 2 25000000000 400 100000000000 1600
KMIN_MAP 2 25000000000 100 100000000000 400
PMAX_MAP 2 25000000000 0.2 100000000000 0.25
BUFFER_SIZE 32
GLOBAL_T 1
"""


def _config(tmp_path, text, rate=G100):
    path = _write(tmp_path, "config.txt", text)
    msgs: list[str] = []
    return path, read_hpcc_config(path, host_rate_bps=rate, warn=msgs.append), msgs


def test_config_maps_onto_network_settings(tmp_path):
    path, s, msgs = _config(tmp_path, FULL_CONFIG)
    o = s.overrides
    assert o["network.cc"] == "dcqcn" and o["network.payload_bytes"] == 1000 and o["network.buffer_mb"] == 32
    assert (o["network.ecn.kmin_kb"], o["network.ecn.kmax_kb"], o["network.ecn.pmax"]) == (400, 1600, 0.25)
    assert o["network.ecn.enabled"] is True and o["network.window"] is False and o["network.var_win"] is False
    assert o["network.dcqcn.g"] == o["network.dctcp.g"] == 0.00390625
    assert (o["network.dcqcn.rate_ai_mbps"], o["network.dcqcn.rate_hai_mbps"]) == (20, 200)
    assert o["network.hpcc.w_ai_mbps"] == 20 and o["network.dctcp.rate_ai_mbps"] == 1000
    assert o["network.dcqcn.min_rate_mbps"] == o["network.hpcc.min_rate_mbps"] == 100
    assert (o["network.dcqcn.alpha_interval_us"], o["network.dcqcn.decrease_interval_us"],
            o["network.dcqcn.rp_timer_us"], o["network.dcqcn.fast_recovery_steps"]) == (1, 4, 300, 1)
    assert (o["network.hpcc.eta"], o["network.hpcc.max_stage"]) == (0.95, 5)
    assert o["simulation.time_limit_ms"] == 4000
    assert o["network.dcqcn.clamp_target_rate"] is False
    assert o["network.global_window"] is True
    assert o["network.pfc.pause_host_acks"] is False     # ACK_HIGH_PRIO 1: hosts' ACKs never paused
    assert s.ignored == () and not msgs
    assert {"L2_BACK_TO_ZERO", "ACK_HIGH_PRIO", "TOPOLOGY_FILE", "FAST_REACT", "INT_MULTI"} <= set(s.used)
    # every override is a valid configuration path and value
    cfg = load_config({}, **{k.replace(".", "__"): v for k, v in o.items()})
    assert cfg.network.cc == "dcqcn" and cfg.network.ecn.kmin_kb == 400


def test_ack_high_prio_chooses_whether_a_pause_stops_the_hosts_acks(tmp_path):
    """third.cc applies ACK_HIGH_PRIO to the hosts' ACK queue only (0: in the data's PFC class)."""
    for value, paused in (("0", True), ("1", False)):
        _, s, msgs = _config(tmp_path, f"ACK_HIGH_PRIO {value}\n")
        assert s.overrides == {"network.pfc.pause_host_acks": paused} and not msgs


def test_config_other_host_rate_picks_other_map_entry(tmp_path):
    _, s, _ = _config(tmp_path, "KMIN_MAP 2 25000000000 100 100000000000 400\n", rate=25 * 10**9)
    assert s.overrides == {"network.ecn.kmin_kb": 100.0}


# wire sizes: the HPCC simulator's SeqTsHeader/qbbHeader/IntHeader sizes (48/54/42 B under CC_MODE 3,
# 6/12/0 otherwise) + UDP 8, IPv4 20, PPP 2; an ACK padded to 60 - 14 B
@pytest.mark.parametrize("mode, cc, header, ack", [(1, "dcqcn", 36, 48), (3, "hpcc", 78, 76), (8, "dctcp", 36, 48)])
def test_cc_mode_mapping(tmp_path, mode, cc, header, ack):
    _, s, msgs = _config(tmp_path, f"CC_MODE {mode}\n")
    assert s.overrides == {"network.cc": cc, "network.header_bytes": header, "network.ack_bytes": ack} and not msgs


def test_warnings_by_default(tmp_path):
    path = _write(tmp_path, "config.txt", "CC_MODE 3\nPINT_PROB 1.0\nDATA_RATE 100Gb/s\nFOO 3\nFOO 4\n")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = read_hpcc_config(path, host_rate_bps=G100)
    msgs = [str(x.message) for x in w if issubclass(x.category, HpccConfigWarning)]
    # each ignored key warned exactly once (FOO appears twice), in file order
    assert len(msgs) == 2 and s.ignored == ("DATA_RATE", "FOO")
    assert msgs[0].startswith(f"{path}: DATA_RATE ignored") and "not an HPCC key" in msgs[1]


def test_shipped_config_warns_about_nothing(tmp_path):
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "hpcc", "config.txt")
    msgs: list[str] = []
    s = read_hpcc_config(path, host_rate_bps=G100, warn=msgs.append)
    assert s.ignored == () and not msgs


@pytest.mark.parametrize("text", [
    "CC_MODE 1\nFAST_REACT 0\nINT_MULTI 4\nMULTI_RATE 1\nSAMPLE_FEEDBACK 1\n",   # HPCC's keys, under DCQCN
    "CC_MODE 3\nFAST_REACT 1.0\nINT_MULTI 1\nMULTI_RATE 0\nSAMPLE_FEEDBACK 0\nRATE_BOUND 1\n",
    "ERROR_RATE_PER_LINK 0.0000\nLINK_DOWN 0 0 0\nL2_ACK_INTERVAL 1\nPAUSE_TIME 5\nPINT_PROB 0.5\n",
    # the HPCC repository's mix/config.txt and run.py: a chunk size without effect (ACK per packet, no back-to-zero)
    "L2_CHUNK_SIZE 4000\nL2_ACK_INTERVAL 1\nL2_BACK_TO_ZERO 0\n",
])
def test_modelled_values_accepted_silently(tmp_path, text):
    _, s, msgs = _config(tmp_path, text)
    assert not msgs and not s.ignored


def test_int_multi_maps_onto_hpccs_int_units(tmp_path):
    _, s, msgs = _config(tmp_path, "CC_MODE 3\nINT_MULTI 4\n")
    assert s.overrides["network.hpcc.int_multi"] == 4 and not msgs


def test_clamp_target_rate(tmp_path):
    _, s, _ = _config(tmp_path, "CLAMP_TARGET_RATE 1\n")
    assert s.overrides == {"network.dcqcn.clamp_target_rate": True}


@pytest.mark.parametrize("text, line, match", [
    ("CC_MODE 1\nCC_MODE 7\n", 2, "CC_MODE 7 (TIMELY) is not supported"),
    ("CC_MODE 10\n", 1, "CC_MODE 10 (HPCC-PINT) is not supported"),
    ("CC_MODE 2\n", 1, "supported: 1 = DCQCN, 3 = HPCC, 8 = DCTCP"),
    ("CC_MODE one\n", 1, "cannot parse CC_MODE 'one'"),
    ("PACKET_PAYLOAD_SIZE 0\n", 1, "must be > 0"),
    ("BUFFER_SIZE 32 MB\n", 1, "BUFFER_SIZE takes one value"),
    ("ENABLE_QCN 2\n", 1, "must be 0 or 1"),
    ("MIN_RATE 100Mbit\n", 1, "MIN_RATE: cannot parse rate '100Mbit'"),
    ("KMAX_MAP 2 100000000000 1600\n", 1, "says 2 entries but has 2 values"),
    ("KMAX_MAP 1 40000000000 1600\n", 1, "no entry for the host link rate 100000000000 bps"),
    ("PMAX_MAP 1 100000000000 high\n", 1, "cannot parse PMAX_MAP value 'high'"),
    ("EWMA_GAIN 2\n", 1, "must be in [0, 1]"),
    ("\nU_TARGET 0\n", 2, "U_TARGET must be in [0.01, 1]"),
    # values mvopt does not model: refused by name, with what it does and what it accepts
    ("L2_BACK_TO_ZERO 1\n", 1, "L2_BACK_TO_ZERO 1 is not supported: mvopt recovers with go-back-N"),
    ("ACK_HIGH_PRIO 2\n", 1, "ACK_HIGH_PRIO must be 0 or 1, got 2"),
    ("L2_CHUNK_SIZE -1\n", 1, "L2_CHUNK_SIZE must be an integer >= 0, got -1"),
    ("L2_ACK_INTERVAL 4\n", 1, "(supported: 1)"),
    ("L2_ACK_INTERVAL 0\n", 1, "senders ignore every ACK"),
    ("ERROR_RATE_PER_LINK 0.001\n", 1, "link loss is not modelled"),
    ("LINK_DOWN 2000000000 8 9\n", 1, "LINK_DOWN 2000000000 8 9 is not supported: the HPCC simulator's link failures are not read"),
    ("RATE_BOUND 0\n", 1, "RATE_BOUND 0 is not supported"),
    ("USE_DYNAMIC_PFC_THRESHOLD 0\n", 1, "always dynamic"),
    ("PAUSE_TIME 0\n", 1, "PAUSE_TIME 0 is not supported"),
    ("CLAMP_TARGET_RATE 2\n", 1, "must be 0 or 1"),
    ("FAST_REACT 0\nCC_MODE 3\n", 1, "FAST_REACT 0 is not supported with CC_MODE 3 (HPCC): mvopt's HPCC updates"),
    ("CC_MODE 3\n\nINT_MULTI 0\n", 3, "INT_MULTI must be an integer >= 1, got 0"),
    ("INT_MULTI 2.5\n", 1, "INT_MULTI must be an integer >= 1, got 2.5"),
    ("CC_MODE 3\nMULTI_RATE 1\n", 2, "one aggregate rate"),
    ("CC_MODE 3\nSAMPLE_FEEDBACK 1\n", 2, "every ACK carries INT"),
])
def test_bad_config_files(tmp_path, text, line, match):
    path = _write(tmp_path, "config.txt", text)
    _raises_at(lambda: read_hpcc_config(path, host_rate_bps=G100, warn=lambda m: None), path, line, match)


def test_parse_data_rate():
    assert parse_data_rate("100Mb/s") == 10**8
    assert parse_data_rate("20Mbps") == 2 * 10**7
    assert parse_data_rate("1.5Gb/s") == 15 * 10**8
    assert parse_data_rate("5000b/s") == 5000
    with pytest.raises(ValueError):
        parse_data_rate("fast")


# hosts 0, 1 on leaf 4; hosts 2, 3 on leaf 5; spines 6, 7
LEAF_SPINE = ("8 4 8\n4 5 6 7\n" + "".join(f"{h} {4 + h // 2} 100Gbps 1us 0\n" for h in range(4))
              + "".join(f"{a} {b} 100Gbps 1us 0\n" for a in (4, 5) for b in (6, 7)))


@pytest.mark.parametrize("global_t", [0, 1])
def test_global_t_gives_every_flow_the_largest_window_and_rtt(tmp_path, global_t, backend="cpu"):
    from mvopt.engine import simulate
    from mvopt.engine.reference import simulate_reference
    from mvopt.testing import scenarios as sc

    _, s, msgs = _config(tmp_path, f"GLOBAL_T {global_t}\nHAS_WIN 1\n")
    assert s.overrides == {"network.global_window": bool(global_t), "network.window": True} and not msgs
    topo = read_hpcc_topology(_write(tmp_path, "topo.txt", LEAF_SPINE))
    g = TaskGraphBuilder()
    g.flow(0, 1, 50_000)            # one switch apart: 2 links each way
    g.flow(0, 2, 50_000)            # three switches apart: 4 links each way
    exp = sc.experiment(topo, g, cc="dcqcn", window=True, global_window=bool(global_t))
    p = exp.params
    ser = ser_ps(1000, G100)
    near, far = 2 * 2 * 10**6 + 2 * ser, 2 * 4 * 10**6 + 4 * ser      # 2 x delays + one payload per hop
    own = [near, far]
    assert p.flow_base_rtt_ps.tolist() == ([far, far] if global_t else own)
    assert p.flow_win_bytes.tolist() == [r * G100 // (8 * 10**12) for r in ([far, far] if global_t else own)]
    assert p.flow_standalone_ps[0] - near == p.flow_standalone_ps[1] - far      # standalone: the pair's own RTT
    (r,) = simulate([exp], backend=backend)
    assert r.same_as(simulate_reference(exp))
