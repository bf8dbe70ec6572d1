"""The HPCC / ns-3 text topology format (as read by the ns-3 backends of ASTRA-sim and SimAI).

::

    <nodes> <switches> <links>
    <switch id> <switch id> ...
    <src> <dst> <rate> <delay> <error rate>      (one line per link, e.g. 0 16 100Gbps 0.001ms 0)

Node ids are ``0..nodes-1``; the ids not listed on line 2 are hosts. Rates take Gbps/Mbps/Kbps/bps,
delays s/ms/us/ns. mvopt numbers hosts first: hosts keep their relative order, then switches in
id order (the usual files already list hosts first, and then ids are unchanged).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mvopt.cluster.compile import compile_network, hop_layers
from mvopt.cluster.faults import LinkFaults
from mvopt.cluster.compiled import CompiledTopology
from mvopt.cluster.spec import NetworkSpec
from mvopt.cluster.units import format_delay, format_rate, parse_delay, parse_rate
from mvopt.errors import InputFileError
from mvopt.files import read_text, write_text_atomic

__all__ = ["read_hpcc_topology", "write_hpcc_topology", "format_hpcc_topology"]


def _ints(tokens: list[str], file: str, line: int, what: str) -> list[int]:
    try:
        return [int(t) for t in tokens]
    except ValueError:
        raise InputFileError(file, line, f"cannot parse {what} {' '.join(tokens)!r} (integers expected)") from None


def read_hpcc_topology(path: str | os.PathLike, *, nics_per_server: int = 1, gpus_per_server: int = 8,
                       parameters: dict[str, Any] | None = None, faults: LinkFaults | None = None) -> CompiledTopology:
    """Read, validate and compile an HPCC topology file; errors raise InputFileError(file, line, ...).

    ``faults`` name links by their tier and their order among the file's links of that tier."""
    file = str(path)
    text = read_text(path)
    rows = [(i + 1, ln.split()) for i, ln in enumerate(text.splitlines()) if ln.strip()]
    if not rows:
        raise InputFileError(file, None, "empty file")
    line, head = rows[0]
    if len(head) != 3:
        raise InputFileError(file, line, "expected '<nodes> <switches> <links>'")
    n_node, n_sw, n_link = _ints(head, file, line, "header")
    if n_node < 2 or not 1 <= n_sw < n_node or n_link < 1:
        raise InputFileError(file, line, f"need nodes >= 2, 1 <= switches < nodes and links >= 1, "
                             f"got {n_node} {n_sw} {n_link}")
    if len(rows) < 2:
        raise InputFileError(file, None, "missing the line of switch ids")
    line, toks = rows[1]
    sw_ids = _ints(toks, file, line, "switch ids")
    if len(sw_ids) != n_sw:
        raise InputFileError(file, line, f"lists {len(sw_ids)} switch ids, the header says {n_sw}")
    for v in sw_ids:
        if not 0 <= v < n_node:
            raise InputFileError(file, line, f"unknown node id {v} (nodes are 0..{n_node - 1})")
    if len(set(sw_ids)) != n_sw:
        raise InputFileError(file, line, "a switch id is listed twice")
    links = rows[2:]
    if len(links) != n_link:
        at = links[n_link][0] if len(links) > n_link else None
        raise InputFileError(file, at, f"has {len(links)} link lines, the header says {n_link}")
    a = np.empty(n_link, np.int64)
    b = np.empty(n_link, np.int64)
    rate = np.empty(n_link, np.int64)
    delay = np.empty(n_link, np.int64)
    lines = []
    for i, (line, toks) in enumerate(links):
        if len(toks) != 5:
            raise InputFileError(file, line, "expected '<src> <dst> <rate> <delay> <error rate>'")
        a[i], b[i] = _ints(toks[:2], file, line, "node ids")
        for v in (a[i], b[i]):
            if not 0 <= v < n_node:
                raise InputFileError(file, line, f"unknown node id {v} (nodes are 0..{n_node - 1})")
        try:
            rate[i], delay[i] = parse_rate(toks[2]), parse_delay(toks[3])
            err = float(toks[4])
        except ValueError as e:
            msg = str(e) if "rate" in str(e) or "delay" in str(e) else f"cannot parse error rate {toks[4]!r}"
            raise InputFileError(file, line, msg) from None
        if err != 0:
            raise InputFileError(file, line, f"error rate {toks[4]} is not supported (link loss is not "
                                 "modelled; use 0)")
        lines.append(line)
    is_sw = np.zeros(n_node, bool)
    is_sw[sw_ids] = True
    old = np.concatenate([np.flatnonzero(~is_sw), np.flatnonzero(is_sw)])
    new = np.empty(n_node, np.int64)
    new[old] = np.arange(n_node)
    n_host = n_node - n_sw
    a, b = new[a], new[b]
    sw_tier, link_tier = hop_layers(n_host, n_node, a, b)
    params = dict(parameters or {"topology": "file", "topology_file": file})
    if (old != np.arange(n_node)).any():
        params["file_node_ids"] = old.tolist()   # file id of each mvopt node
    spec = NetworkSpec(kind="file", parameters=params, n_host=n_host, switch_tier=sw_tier,
                       link_a=a.astype(np.int32), link_b=b.astype(np.int32), link_rate_bps=rate,
                       link_delay_ps=delay, link_tier=link_tier, nics_per_server=nics_per_server,
                       gpus_per_server=gpus_per_server)
    return compile_network(spec, source=file, link_lines=lines, faults=faults)


def format_hpcc_topology(topo: CompiledTopology) -> str:
    """The topology in the HPCC text format (mvopt node ids; one line per link, host links first)."""
    ends = topo.link_endpoints()[:, 0]
    out = [f"{topo.n_node} {topo.n_switch} {topo.n_link}",
           " ".join(str(v) for v in range(topo.n_host, topo.n_node))]
    src, dst = topo.port_node[ends], topo.port_peer_node[ends]
    rates, delays = topo.port_rate_bps[ends], topo.port_delay_ps[ends]
    rate_s = {int(r): format_rate(int(r)) for r in np.unique(rates)}
    delay_s = {int(d): format_delay(int(d)) for d in np.unique(delays)}
    out.extend(f"{s} {d} {rate_s[r]} {delay_s[t]} 0"
               for s, d, r, t in zip(src.tolist(), dst.tolist(), rates.tolist(), delays.tolist()))
    return "\n".join(out) + "\n"


def write_hpcc_topology(topo: CompiledTopology, path: str | os.PathLike) -> None:
    """Write :func:`format_hpcc_topology` to ``path`` atomically."""
    write_text_atomic(path, format_hpcc_topology(topo))
