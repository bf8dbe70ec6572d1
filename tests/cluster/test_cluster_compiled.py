"""The compiled form: dtypes, save/load, networkx view."""

from __future__ import annotations

import os

import networkx as nx
import numpy as np
import pytest

from cluster_helpers import build
from mvopt.cluster import CompiledTopology, from_networkx
from mvopt.cluster.compiled import ARRAY_DTYPES
from mvopt.errors import InputFileError


def test_dtypes_and_read_only():
    topo = build(topology="fat_tree", k=4)
    for name, dtype in ARRAY_DTYPES.items():
        arr = getattr(topo, name)
        assert arr.dtype == dtype, name
        with pytest.raises(ValueError):
            arr[...] = 0
    assert topo.node_port_offset.size == topo.n_node + 1 and topo.sw_route_offset.size == topo.n_switch + 1


def test_save_load_roundtrip(tmp_path):
    topo = build(topology="dragonfly", groups=4, routers_per_group=2, hosts_per_router=2, nics_per_server=2)
    path = tmp_path / "t.npz"
    topo.save(path)
    assert sorted(os.listdir(tmp_path)) == ["t.npz"]   # no temporary file left behind
    back = CompiledTopology.load(path)
    for name in ARRAY_DTYPES:
        assert np.array_equal(getattr(topo, name), getattr(back, name)), name
    assert (back.kind, back.parameters, back.n_server, back.gpus_per_server, back.diameter_hops) == \
        (topo.kind, topo.parameters, topo.n_server, topo.gpus_per_server, topo.diameter_hops)


def test_load_rejects_foreign_and_broken_files(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(InputFileError, match="not a compiled topology"):
        CompiledTopology.load(junk)
    topo = build(topology="fat_tree", k=4)
    arrays = {n: np.array(getattr(topo, n)) for n in ARRAY_DTYPES}
    arrays["port_peer_port"][0] = arrays["port_peer_port"][1]
    import json
    meta = {"format_version": 1, "parameters": {}, "kind": "fat_tree", "n_host": topo.n_host,
            "n_server": topo.n_server, "gpus_per_server": topo.gpus_per_server, "diameter_hops": 6}
    broken = tmp_path / "broken.npz"
    np.savez(broken, meta=np.array(json.dumps(meta)), **arrays)
    with pytest.raises(InputFileError, match="port_peer_port is not an involution"):
        CompiledTopology.load(broken)


def test_networkx_view_roundtrip():
    topo = build(topology="leaf_spine", leaves=3, hosts_per_leaf=8, link_gbps=[25, 100], link_delay_ns=[100, 2000])
    g = topo.to_networkx()
    assert [g.nodes[v]["role"] for v in range(topo.n_node)] == ["host"] * 24 + ["switch"] * 5
    assert g.number_of_edges() == topo.n_link
    assert g.edges[0, 24] == {"rate": 25.0, "delay": 100.0, "tier": 0}
    again = from_networkx(g)
    for name in ("node_tier", "node_port_offset", "port_peer_node", "port_rate_bps", "port_delay_ps",
                 "port_tier", "route_dst_lo", "route_nhset", "nhset_port"):
        assert np.array_equal(getattr(topo, name), getattr(again, name)), name
    assert "node_labels" not in again.parameters


def test_from_networkx_rejects_bad_graphs():
    g = nx.Graph()
    g.add_node(0, role="host")
    g.add_node(1, role="router")
    with pytest.raises(InputFileError, match="role"):
        from_networkx(g)
    g.nodes[1]["role"] = "switch"
    g.add_edge(0, 1, rate=100)
    with pytest.raises(InputFileError, match="needs attributes 'rate'"):
        from_networkx(g)
    g.edges[0, 1]["delay"] = -1
    with pytest.raises(InputFileError, match="negative delay"):
        from_networkx(g, name="my graph")
    with pytest.raises(InputFileError, match="undirected"):
        from_networkx(nx.DiGraph(g))
