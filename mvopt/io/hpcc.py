"""Inputs and outputs of the HPCC ns-3 simulator (inherited by ASTRA-sim's and SimAI's ns-3 backends).

* ``flow.txt`` — first line ``N``, then ``N`` lines ``src dst priority dport size_bytes start_seconds``
  (:func:`read_hpcc_flows`; :func:`add_hpcc_flows` turns them into tasks).
* ``config.txt`` — ``KEY value...`` lines (:func:`read_hpcc_config` maps the keys that exist in
  mvopt's model onto configuration overrides, refuses a value mvopt does not model, and warns
  once per key it ignores).
* ``fct.txt`` — one line per completed flow ``sip dip sport dport size start_ns fct_ns
  standalone_fct_ns`` (:func:`format_fct` / :func:`write_fct`).

The topology file is read by :func:`mvopt.cluster.read_hpcc_topology`. Node ids in these files are
the topology file's ids; IPs are HPCC's ``node_id_to_ip``. Every malformed input raises
:class:`~mvopt.errors.InputFileError` naming the file and line; outputs are written atomically.
docs/simulate.md documents the formats and every key.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Sequence

import numpy as np

from mvopt._cfg.algorithms import CONGESTION_CONTROLS
from mvopt._cfg.network import NetworkConfig
from mvopt.errors import InputFileError
from mvopt.files import read_text, write_text_atomic

__all__ = [
    "HpccFlow", "HpccSettings", "CC_MODES", "read_hpcc_flows", "add_hpcc_flows", "node_ip", "sports",
    "read_hpcc_config", "format_fct", "write_fct", "parse_data_rate", "HpccConfigWarning", "wire_sizes",
]

PS_PER_S = 10**12
SPORT_BASE = 10000          # HPCC: each host pair numbers its flows' source ports from 10000
# CC_MODE of config.txt -> network.cc; HPCC's other modes are named in the error that refuses them
CC_MODES = {c.hpcc_cc_mode: c.name for c in CONGESTION_CONTROLS if c.hpcc_cc_mode is not None}
_CC_TITLES = {**{c.hpcc_cc_mode: c.title for c in CONGESTION_CONTROLS if c.hpcc_cc_mode is not None},
              7: "TIMELY", 10: "HPCC-PINT"}
# MIN_RATE sets the minimum rate of every congestion-control algorithm that has one
_MIN_RATE_SECTIONS = tuple(c.name for c in CONGESTION_CONTROLS
                           if hasattr(getattr(NetworkConfig(), c.name, None), "min_rate_mbps"))


class HpccConfigWarning(UserWarning):
    """A key of an HPCC config.txt that mvopt reads but does not use."""


# ----------------------------------------------------------------------------------- reading


def _read_rows(path: str | os.PathLike) -> tuple[str, list[tuple[int, list[str]]]]:
    file = str(path)
    text = read_text(path)
    return file, [(i + 1, ln.split()) for i, ln in enumerate(text.splitlines()) if ln.strip()]


def _int(tok: str, file: str, line: int, what: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise InputFileError(file, line, f"cannot parse {what} {tok!r} (an integer expected)") from None


def _decimal(tok: str, file: str, line: int, what: str) -> Decimal:
    try:
        v = Decimal(tok)
    except InvalidOperation:
        raise InputFileError(file, line, f"cannot parse {what} {tok!r} (a number expected)") from None
    if not v.is_finite():
        raise InputFileError(file, line, f"{what} {tok!r} must be a finite number")
    return v


# ----------------------------------------------------------------------------------- flow.txt


@dataclass(frozen=True)
class HpccFlow:
    """One line of flow.txt (node ids as in the file; ``start_ps`` exact to the picosecond)."""

    src: int
    dst: int
    priority: int
    dport: int
    size_bytes: int
    start_ps: int
    line: int


def read_hpcc_flows(path: str | os.PathLike) -> list[HpccFlow]:
    """Parse flow.txt. Node ids are checked against a topology by :func:`add_hpcc_flows`."""
    file, rows = _read_rows(path)
    if not rows:
        raise InputFileError(file, None, "empty file (expected the number of flows on the first line)")
    line, head = rows[0]
    if len(head) != 1:
        raise InputFileError(file, line, "the first line must hold only the number of flows")
    n = _int(head[0], file, line, "number of flows")
    if n < 0:
        raise InputFileError(file, line, f"the number of flows must be >= 0, got {n}")
    body = rows[1:]
    if len(body) != n:
        at = body[n][0] if len(body) > n else (body[-1][0] if body else line)
        raise InputFileError(file, at, f"has {len(body)} flow lines, the first line says {n}")
    flows = []
    for line, toks in body:
        if len(toks) != 6:
            raise InputFileError(file, line, f"expected 'src dst priority dport size_bytes start_seconds' "
                                 f"(6 fields), got {len(toks)}")
        src = _int(toks[0], file, line, "src")
        dst = _int(toks[1], file, line, "dst")
        prio = _int(toks[2], file, line, "priority")
        dport = _int(toks[3], file, line, "dport")
        size = _int(toks[4], file, line, "size")
        start = _decimal(toks[5], file, line, "start time")
        for name, v in (("src", src), ("dst", dst)):
            if v < 0:
                raise InputFileError(file, line, f"{name}: unknown node id {v} (ids are >= 0)")
        if src == dst:
            raise InputFileError(file, line, f"src and dst are the same node ({src})")
        if prio < 0:
            raise InputFileError(file, line, f"priority must be >= 0, got {prio}")
        if not 0 <= dport <= 65535:
            raise InputFileError(file, line, f"dport must be in 0..65535, got {dport}")
        if size < 0:
            raise InputFileError(file, line, f"negative size {size}")
        if size == 0:
            raise InputFileError(file, line, "size must be > 0 bytes")
        if start < 0:
            raise InputFileError(file, line, f"negative start time {toks[5]}")
        start_ps = int((start * PS_PER_S).to_integral_value())
        flows.append(HpccFlow(src, dst, prio, dport, size, start_ps, line))
    return flows


def _file_to_node(topo) -> np.ndarray:
    """mvopt node id of each topology-file node id (identity unless the file listed switches first)."""
    n = int(topo.n_node)
    ids = (getattr(topo, "parameters", None) or {}).get("file_node_ids")
    if ids is None:
        return np.arange(n)
    out = np.empty(n, np.int64)
    out[np.asarray(ids, np.int64)] = np.arange(n)
    return out


def add_hpcc_flows(b, flows: Sequence[HpccFlow], topo, file: str = "flow.txt", *, category: str = "flow") -> None:
    """The flows as tasks of the task-graph builder `b` (an empty one's task ``i`` is flow ``i``;
    no dependencies, its start time).

    Checks every node id against ``topo`` (unknown ids and switches raise InputFileError at the
    flow's line)."""
    node_of = _file_to_node(topo)
    n_node, n_host = int(topo.n_node), int(topo.n_host)
    for f in flows:
        ends = []
        for name, v in (("src", f.src), ("dst", f.dst)):
            if not 0 <= v < n_node:
                raise InputFileError(file, f.line, f"{name}: unknown node id {v} (the topology has "
                                     f"nodes 0..{n_node - 1})")
            node = int(node_of[v])
            if node >= n_host:
                raise InputFileError(file, f.line, f"{name}: node {v} is a switch, not a host")
            ends.append(node)
        b.flow(ends[0], ends[1], f.size_bytes, start_ps=f.start_ps, category=category)


def node_ip(node_id: int) -> int:
    """HPCC's ``node_id_to_ip``: 0x0b000001 + (id / 256)·0x10000 + (id % 256)·0x100."""
    return 0x0B000001 + (node_id // 256) * 0x10000 + (node_id % 256) * 0x100


def sports(flows: Sequence[HpccFlow]) -> list[int]:
    """Source ports as HPCC assigns them: per (source, destination) pair 10000, 10001, ... in
    file order (16-bit; third.cc's ``portNumder[src][dst]++``)."""
    nxt: dict[tuple[int, int], int] = {}
    out = []
    for f in flows:
        p = nxt.get((f.src, f.dst), SPORT_BASE)
        out.append(p & 0xFFFF)
        nxt[f.src, f.dst] = p + 1
    return out


# ----------------------------------------------------------------------------------- fct.txt


def _ns(ps: int) -> int:
    """Picoseconds to whole nanoseconds, rounded to nearest (halves up)."""
    return (int(ps) + 500) // 1000


def format_fct(flows: Sequence[HpccFlow], result) -> str:
    """fct.txt for the flows of one result (flow ``i`` = task ``i``), in flow-file order.

    Flows that did not complete (an experiment that timed out or got stuck) are left out, as
    HPCC leaves out the flows unfinished at its stop time."""
    fct = np.asarray(result.flow_fct_ps)
    standalone = np.asarray(result.flow_standalone_ps)
    ids = np.asarray(result.flow_ids)
    start = np.asarray(result.task_start_ps)
    if len(ids) != len(flows):
        raise ValueError(f"the result has {len(ids)} flows, the flow file {len(flows)}")
    lines = []
    for i, (f, sport) in enumerate(zip(flows, sports(flows))):
        if fct[i] < 0:
            continue
        lines.append(f"{node_ip(f.src):08x} {node_ip(f.dst):08x} {sport} {f.dport} {f.size_bytes} "
                     f"{_ns(start[ids[i]])} {_ns(fct[i])} {_ns(standalone[i])}\n")
    return "".join(lines)


def write_fct(path: str | os.PathLike, flows: Sequence[HpccFlow], result) -> int:
    """Write fct.txt atomically; returns the number of flow lines written."""
    text = format_fct(flows, result)
    write_text_atomic(path, text)
    return text.count("\n")


# ----------------------------------------------------------------------------------- config.txt

_RATE_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([KMG]?)(b/s|bps)$", re.IGNORECASE)
_RATE_MULT = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_data_rate(text: str) -> int:
    """An ns-3 DataRate string (``100Mb/s``, ``20Mbps``, ``1Gb/s``, ``5000b/s``) in bits/s."""
    m = _RATE_RE.match(text)
    if not m:
        raise ValueError(f"cannot parse rate {text!r} (expected e.g. 100Mb/s, 20Mbps or 1Gb/s)")
    bps = Decimal(m.group(1)) * _RATE_MULT[m.group(2).lower()]
    if bps <= 0:
        raise ValueError(f"rate {text!r} must be > 0")
    return int(bps.to_integral_value())


@dataclass(frozen=True)
class HpccSettings:
    """What a config.txt says, as mvopt configuration overrides.

    ``overrides`` maps dotted configuration paths (``network.cc``) to values; ``used`` lists
    the keys that were applied, ``ignored`` the keys read but not used (each warned once), in
    file order."""

    overrides: dict[str, Any] = field(default_factory=dict)
    used: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


# Wire sizes of the HPCC simulator's packets (rdma-hw.cc, int-header.h): a data packet is the payload
# + PPP 2 + IPv4 20 + UDP 8 + SeqTs 6 + INT; an ACK/NACK is PPP 2 + IPv4 20 + qbb 12 + INT, the part
# after IPv4 padded to 26 B (a 60 B Ethernet frame less its 14 B header and IPv4). HPCC's INT
# (CC_MODE 3) is 5 hops of 8 B and a 2 B hop count; the other modes mvopt runs carry none.
_INT_BYTES = {3: 5 * 8 + 2}
_PPP, _IPV4, _UDP, _SEQTS, _QBB = 2, 20, 8, 6, 12
_ACK_MIN_AFTER_IPV4 = 60 - 14 - _IPV4


def wire_sizes(cc_mode: int) -> tuple[int, int]:
    """(header bytes per data packet, ACK/NACK bytes) on the HPCC simulator's wire under `cc_mode`."""
    intb = _INT_BYTES.get(cc_mode, 0)
    return _PPP + _IPV4 + _UDP + _SEQTS + intb, _PPP + _IPV4 + max(_ACK_MIN_AFTER_IPV4, _QBB + intb)


# Keys whose value mvopt's model matches: (accepted values, as numbers; what mvopt does; the
# network.cc they matter to, None: all). Another value is refused by name; a key that does not
# matter to the experiment's congestion control is accepted whatever its value.
_MODEL_VALUES: dict[str, tuple[tuple[tuple[Decimal, ...], ...], str, str | None]] = {
    "USE_DYNAMIC_PFC_THRESHOLD": (((Decimal(1),),), "mvopt's PFC threshold is always dynamic", None),
    "L2_ACK_INTERVAL": (((Decimal(1),),), "mvopt acknowledges every packet (with 0 the HPCC simulator's "
                        "senders ignore every ACK and no flow ends)", None),
    "L2_BACK_TO_ZERO": (((Decimal(0),),), "mvopt recovers with go-back-N from the first lost packet", None),
    "ERROR_RATE_PER_LINK": (((Decimal(0),),), "link loss is not modelled", None),
    "LINK_DOWN": (((Decimal(0), Decimal(0), Decimal(0)),), "the HPCC simulator's link failures are not read (mvopt's "
                  "cluster.link_down models a link going down; the two have not been compared)", None),
    "RATE_BOUND": (((Decimal(1),),), "senders are always paced at their congestion-control rate", None),
    "FAST_REACT": (((Decimal(1),),), "mvopt's HPCC updates its rate on every ACK", "hpcc"),
    "MULTI_RATE": (((Decimal(0),),), "mvopt's HPCC keeps one aggregate rate, not one per hop", "hpcc"),
    "SAMPLE_FEEDBACK": (((Decimal(0),),), "every ACK carries INT", "hpcc"),
}
# Keys naming files the command line gives instead, or traces mvopt does not write: no effect
# on the results, accepted silently.
_FILE_KEYS = frozenset({
    "TOPOLOGY_FILE", "FLOW_FILE", "FCT_OUTPUT_FILE", "TRACE_FILE", "TRACE_OUTPUT_FILE", "ENABLE_TRACE",
    "PFC_OUTPUT_FILE", "QLEN_MON_FILE", "QLEN_MON_START", "QLEN_MON_END",
})
# Keys only HPCC-PINT (CC_MODE 10, refused) reads: no effect on any mode mvopt runs.
_PINT_KEYS = frozenset({"PINT_LOG_BASE", "PINT_PROB"})
# Keys HPCC reads that mvopt does not use (explanations for the warning).
_IGNORED: dict[str, str] = {
    "DATA_RATE": "link rates come from the topology", "LINK_DELAY": "link delays come from the topology",
}


def _model_value(key: str, vals: list[str]) -> bool:
    """Whether `vals` is one of the values of _MODEL_VALUES[key] (compared as numbers)."""
    try:
        got = tuple(Decimal(v) for v in vals)
    except InvalidOperation:
        return False
    return got in _MODEL_VALUES[key][0]


def _ewma(v: Decimal) -> dict[str, float]:
    return {"network.dcqcn.g": float(v), "network.dctcp.g": float(v)}


def read_hpcc_config(path: str | os.PathLike, *, host_rate_bps: int,
                     warn: Callable[[str], None] | None = None) -> HpccSettings:
    """Map an HPCC config.txt onto mvopt configuration overrides.

    ``host_rate_bps`` selects the entry of KMIN_MAP/KMAX_MAP/PMAX_MAP (mvopt uses one ECN
    setting for all ports). Each key that is read but not used is reported once through
    ``warn`` (default: :func:`warnings.warn` with :class:`HpccConfigWarning`). Unsupported
    CC_MODE values and unparseable values raise InputFileError with the file and line.
    """
    file, rows = _read_rows(path)
    out: dict[str, Any] = {}
    used: list[str] = []
    ignored: dict[str, str] = {}
    modelled: list[tuple[str, list[str], int]] = []     # a model key's value other than mvopt's

    def number(toks: list[str], line: int, key: str) -> Decimal:
        if len(toks) != 1:
            raise InputFileError(file, line, f"{key} takes one value, got {len(toks)}")
        return _decimal(toks[0], file, line, key)

    def positive(toks, line, key) -> Decimal:
        v = number(toks, line, key)
        if v <= 0:
            raise InputFileError(file, line, f"{key} must be > 0, got {toks[0]}")
        return v

    def integer(toks, line, key, least: int) -> int:
        v = number(toks, line, key)
        if v < least or v != int(v):
            raise InputFileError(file, line, f"{key} must be an integer >= {least}, got {toks[0]}")
        return int(v)

    def flag(toks, line, key) -> bool:
        v = number(toks, line, key)
        if v not in (0, 1):
            raise InputFileError(file, line, f"{key} must be 0 or 1, got {toks[0]}")
        return bool(v)

    def rate_mbps(toks, line, key) -> float:
        if len(toks) != 1:
            raise InputFileError(file, line, f"{key} takes one rate, got {len(toks)} values")
        try:
            return parse_data_rate(toks[0]) / 1e6
        except ValueError as e:
            raise InputFileError(file, line, f"{key}: {e}") from None

    def rate_map(toks, line, key, kind: Callable[[Decimal], Any]) -> Any:
        if not toks:
            raise InputFileError(file, line, f"{key} expects 'n rate1 value1 ... rateN valueN'")
        n = _int(toks[0], file, line, f"{key} count")
        if n < 1 or len(toks) != 1 + 2 * n:
            raise InputFileError(file, line, f"{key} says {n} entries but has {len(toks) - 1} values "
                                 f"(expected 2 per entry: rate in bps, value)")
        table = {}
        for i in range(n):
            rate = _int(toks[1 + 2 * i], file, line, f"{key} rate")
            table[rate] = kind(_decimal(toks[2 + 2 * i], file, line, f"{key} value"))
        if host_rate_bps not in table:
            raise InputFileError(file, line, f"{key} has no entry for the host link rate {host_rate_bps} bps "
                                 f"(rates listed: {', '.join(str(r) for r in table)})")
        return table[host_rate_bps]

    for line, toks in rows:
        key, vals = toks[0], toks[1:]
        if key.startswith("#"):
            continue
        if key == "CC_MODE":
            v = number(vals, line, key)
            mode = int(v) if v == v.to_integral_value() else None
            if mode not in CC_MODES:
                name = f" ({_CC_TITLES[mode]})" if mode in _CC_TITLES else ""
                supported = ", ".join(f"{m} = {_CC_TITLES[m]}" for m in sorted(CC_MODES))
                raise InputFileError(file, line, f"CC_MODE {vals[0]}{name} is not supported (supported: {supported})")
            out["network.cc"] = CC_MODES[mode]
            out["network.header_bytes"], out["network.ack_bytes"] = wire_sizes(mode)
        elif key == "PACKET_PAYLOAD_SIZE":
            v = positive(vals, line, key)
            if v != int(v) or v > 65536:
                raise InputFileError(file, line, f"{key} must be an integer in 1..65536, got {vals[0]}")
            out["network.payload_bytes"] = int(v)
        elif key == "BUFFER_SIZE":
            out["network.buffer_mb"] = float(positive(vals, line, key))
        elif key == "KMIN_MAP":
            out["network.ecn.kmin_kb"] = rate_map(vals, line, key, float)
        elif key == "KMAX_MAP":
            out["network.ecn.kmax_kb"] = rate_map(vals, line, key, float)
        elif key == "PMAX_MAP":
            out["network.ecn.pmax"] = rate_map(vals, line, key, float)
        elif key == "ENABLE_QCN":
            out["network.ecn.enabled"] = flag(vals, line, key)
        elif key == "EWMA_GAIN":
            v = number(vals, line, key)
            if not 0 <= v <= 1:
                raise InputFileError(file, line, f"{key} must be in [0, 1], got {vals[0]}")
            out.update(_ewma(v))
        elif key == "RATE_AI":
            v = rate_mbps(vals, line, key)
            out["network.dcqcn.rate_ai_mbps"] = v
            out["network.hpcc.w_ai_mbps"] = v
        elif key == "RATE_HAI":
            out["network.dcqcn.rate_hai_mbps"] = rate_mbps(vals, line, key)
        elif key == "DCTCP_RATE_AI":
            out["network.dctcp.rate_ai_mbps"] = rate_mbps(vals, line, key)
        elif key == "MIN_RATE":
            v = rate_mbps(vals, line, key)
            for cc in _MIN_RATE_SECTIONS:
                out[f"network.{cc}.min_rate_mbps"] = v
        elif key == "ALPHA_RESUME_INTERVAL":
            out["network.dcqcn.alpha_interval_us"] = float(positive(vals, line, key))
        elif key == "RATE_DECREASE_INTERVAL":
            out["network.dcqcn.decrease_interval_us"] = float(positive(vals, line, key))
        elif key == "RP_TIMER":
            out["network.dcqcn.rp_timer_us"] = float(positive(vals, line, key))
        elif key == "FAST_RECOVERY_TIMES":
            out["network.dcqcn.fast_recovery_steps"] = integer(vals, line, key, 0)
        elif key == "U_TARGET":
            v = number(vals, line, key)
            if not Decimal("0.01") <= v <= 1:
                raise InputFileError(file, line, f"{key} must be in [0.01, 1], got {vals[0]}")
            out["network.hpcc.eta"] = float(v)
        elif key == "MI_THRESH":
            out["network.hpcc.max_stage"] = integer(vals, line, key, 0)
        elif key == "HAS_WIN":
            out["network.window"] = flag(vals, line, key)
        elif key == "VAR_WIN":
            out["network.var_win"] = flag(vals, line, key)
        elif key == "GLOBAL_T":
            out["network.global_window"] = flag(vals, line, key)
        elif key == "SIMULATOR_STOP_TIME":
            out["simulation.time_limit_ms"] = float(positive(vals, line, key) * 1000)
        elif key == "CLAMP_TARGET_RATE":
            out["network.dcqcn.clamp_target_rate"] = flag(vals, line, key)
        elif key == "INT_MULTI":
            out["network.hpcc.int_multi"] = integer(vals, line, key, 1)
        elif key == "ACK_HIGH_PRIO":
            # third.cc gives it to the hosts only (the ACK queue's PFC class); switches queue
            # ACK/NACKs with data whatever it says (network.switch_ack_queue, set for HPCC inputs)
            out["network.pfc.pause_host_acks"] = not flag(vals, line, key)
        elif key == "L2_CHUNK_SIZE":
            # Only read by HPCC's receiver when an in-order packet does not reach the ACK
            # interval's milestone and by back-to-zero recovery: with the ACK per packet and
            # go-back-N required above, no value changes results.
            integer(vals, line, key, 0)
        elif key == "PAUSE_TIME":
            if number(vals, line, key) <= 0:
                raise InputFileError(file, line, f"PAUSE_TIME {vals[0]} is not supported: a pause frame with "
                                     "time 0 resumes in the HPCC simulator; mvopt's pauses last until resumed "
                                     "(supported: any time > 0)")
        elif key in _MODEL_VALUES:
            if not _model_value(key, vals):
                modelled.append((key, vals, line))
        elif key in _FILE_KEYS or key in _PINT_KEYS:
            pass
        elif key in _IGNORED:
            ignored.setdefault(key, _IGNORED[key])
            continue
        else:
            ignored.setdefault(key, "not an HPCC key mvopt knows")
            continue
        used.append(key)
    cc = out.get("network.cc", NetworkConfig().cc)
    for key, vals, line in modelled:
        accepted, why, only = _MODEL_VALUES[key]
        if only is None or only == cc:
            allowed = " or ".join(" ".join(str(v) for v in a) for a in accepted)
            mode = next((m for m, name in CC_MODES.items() if name == only), None)
            scope = f" with CC_MODE {mode} ({_CC_TITLES[mode]})" if only else ""
            raise InputFileError(file, line, f"{key} {' '.join(vals)} is not supported{scope}: {why} "
                                 f"(supported: {allowed})")
    report = warn or (lambda msg: warnings.warn(msg, HpccConfigWarning, stacklevel=3))
    for key, why in ignored.items():
        report(f"{file}: {key} ignored ({why})")
    return HpccSettings(overrides=out, used=tuple(dict.fromkeys(used)), ignored=tuple(ignored))
