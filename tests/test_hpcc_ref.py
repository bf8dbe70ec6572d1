"""The mvopt-vs-HPCC-simulator harness (experiments/hpcc_ref/): its files are valid mvopt inputs.

No reference simulator in CI: the scenario generator's topology, flow and config files are read
by mvopt's HPCC readers (every scenario, every setting), and one tiny scenario runs through
``mvopt simulate --hpcc-*``. Where the HPCC simulator is built (experiments/hpcc_ref/build.sh),
that scenario also runs through it and both fct.txt files must list the same flows.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from mvopt.__main__ import main as mvopt
from mvopt.cluster import read_hpcc_topology
from mvopt.io.hpcc import read_hpcc_config, read_hpcc_flows
from mvopt.io.hpcc_paths import hpcc_flow_paths

HARNESS = Path(__file__).resolve().parents[1] / "experiments" / "hpcc_ref"
G100 = 100 * 10**9


def _load(name: str):
    if str(HARNESS) not in sys.path:
        sys.path.insert(0, str(HARNESS))        # compare.py imports scenarios.py by name
    spec = importlib.util.spec_from_file_location(f"hpcc_ref_{name}", HARNESS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


S = _load("scenarios")
C = _load("compare")


def test_topologies_have_the_stated_shape():
    ft = S.fat_tree(8)
    assert (ft.n_host, ft.n_switch, len(ft.links)) == (128, 80, 3 * 128)
    ls = S.leaf_spine(8, 16, 8)
    assert (ls.n_host, ls.n_switch, len(ls.links)) == (128, 16, 128 + 64)
    # 2:1: 16 host links and 8 spine links per leaf
    leaf = 128
    assert sum(leaf in lk for lk in ls.links) == 16 + 8


def test_scenario_flows():
    by = {sc.name: sc for sc in S.scenarios()}
    assert {f.dst for f in by["ft-incast63"].flows} == {0} and len({f.src for f in by["ft-incast63"].flows}) == 63
    perm = by["ft-permutation"].flows
    assert sorted(f.src for f in perm) == sorted(f.dst for f in perm) == list(range(128))
    assert len(by["ft-alltoall"].flows) == 16 * 15
    sizes = [f.size_bytes for f in by["ft-mixed"].flows]
    assert 64_000 <= min(sizes) and max(sizes) <= 16_000_000
    starts = [f.start_s for f in by["ft-mixed"].flows]
    assert starts == sorted(starts) and starts[-1] > starts[0]       # staggered, in the order third.cc reads
    assert len(C.RUNS) >= 24 and {s for _, s in C.RUNS} == set(S.SETTINGS)


@pytest.mark.parametrize("setting", sorted(S.SETTINGS))
def test_every_written_file_is_read_by_mvopt(tmp_path, setting):
    for sc in S.scenarios(scale=0.01):
        cfg = S.write_run(tmp_path / sc.name, sc, S.SETTINGS[setting])
        topo = read_hpcc_topology(cfg.with_name("topology.txt"))
        flows = read_hpcc_flows(cfg.with_name("flow.txt"))
        assert len(flows) == len(sc.flows) and int(topo.n_host) == sc.topo.n_host
        msgs: list[str] = []
        s = read_hpcc_config(cfg, host_rate_bps=G100, warn=msgs.append)     # as written: nothing refused
        assert not msgs and s.overrides["network.cc"] == {"1": "dcqcn", "3": "hpcc", "8": "dctcp"}[
            S.SETTINGS[setting]["CC_MODE"]]
    # paths exist for every flow of the last (leaf-spine) scenario
    assert all(d and a for d, a in hpcc_flow_paths(topo, flows))


def _tiny(tmp_path) -> Path:
    ls = S.leaf_spine(2, 4, 2)
    sc = S.Scenario("tiny", ls, tuple(S.incast(ls, 3, 20_000)), "3 -> 1")
    return S.write_run(tmp_path, sc, S.SETTINGS["dcqcn"])


def test_tiny_scenario_through_mvopt_simulate(tmp_path, capsys):
    cfg = _tiny(tmp_path)
    assert mvopt(["simulate", "--hpcc-topology", str(cfg.with_name("topology.txt")), "--hpcc-flows",
                  str(cfg.with_name("flow.txt")), "--hpcc-config", str(cfg), "--fct-out",
                  str(tmp_path / "fct_mvopt.txt"), "--backend", "cpu"]) == 0
    assert "warning" not in capsys.readouterr().err
    fct = C.read_fct(tmp_path / "fct_mvopt.txt")
    assert len(fct) == 3 and all(size == 20_000 and start == 2 * 10**9 for size, start, _ in fct.values())


def test_tiny_scenario_against_the_reference(tmp_path):
    binary = C.reference_binary()
    if binary is None:
        pytest.skip("the HPCC simulator is not built (experiments/hpcc_ref/build.sh)")
    cfg = _tiny(tmp_path)
    C.run_reference(binary, tmp_path)
    C.run_mvopt(tmp_path, cfg, "cpu")
    ref, mv = C.read_fct(tmp_path / "fct_ref.txt"), C.read_fct(tmp_path / "fct_mvopt.txt")
    assert set(ref) == set(mv) and len(ref) == 3
    res = C.compare(ref, mv)
    assert res["missing_in_mvopt"] == 0 and res["total_ref_ns"] > 0


@pytest.mark.parametrize("setting", ["shipped-dcqcn", "shipped-hpcc", "shipped-dctcp"])
def test_the_shipped_config_is_read_without_a_warning(tmp_path, capsys, setting):
    """The HPCC repository's mix/config.txt (scenarios._SHIPPED, ACK_HIGH_PRIO 0 included) under
    each CC_MODE: `mvopt simulate --hpcc-*` warns about nothing."""
    cfg = S.write_run(tmp_path, S.Scenario("one", S.leaf_spine(2, 4, 2), (S.Flow(0, 5, 1000),), ""),
                      S.SETTINGS[setting])
    assert mvopt(["simulate", "--hpcc-topology", str(cfg.with_name("topology.txt")), "--hpcc-flows",
                  str(cfg.with_name("flow.txt")), "--hpcc-config", str(cfg), "--fct-out",
                  str(tmp_path / "fct_mvopt.txt"), "--backend", "cpu"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_one_packet_flow_uses_the_hpcc_simulators_wire_sizes(tmp_path, capsys):
    """DCQCN (CC_MODE 1): a 1036 B data packet and a 48 B ACK over 4 links of 100 Gb/s and 1 us:
    4 x (82.88 + 1000) ns + 4 x (3.84 + 1000) ns = 8,346.88 ns (the HPCC simulator, which
    rounds each serialization to the nanosecond, gives 8,348 ns)."""
    ls = S.leaf_spine(2, 4, 2)
    cfg = S.write_run(tmp_path, S.Scenario("one", ls, (S.Flow(0, 5, 1000),), ""), S.SETTINGS["dcqcn"])
    assert mvopt(["simulate", "--hpcc-topology", str(cfg.with_name("topology.txt")), "--hpcc-flows",
                  str(cfg.with_name("flow.txt")), "--hpcc-config", str(cfg), "--fct-out",
                  str(tmp_path / "fct_mvopt.txt"), "--backend", "cpu"]) == 0
    capsys.readouterr()
    ((_, _, fct_ns),) = C.read_fct(tmp_path / "fct_mvopt.txt").values()
    assert fct_ns == 8347


def test_draws_and_trace_give_the_total_mvopt_simulate_gives(tmp_path, capsys):
    """draws.py's mvopt totals (simulation.seed 1..N) and trace_dcqcn.py's end (the reference
    simulator) build the run as `mvopt simulate --hpcc-*` does: seed 1 gives its total."""
    D, T = _load("draws"), _load("trace_dcqcn")
    cfg = _tiny(tmp_path)
    C.run_mvopt(tmp_path, cfg, "cpu")
    total = C.compare(*(2 * [C.read_fct(tmp_path / "fct_mvopt.txt")]))["total_ref_ns"]
    assert D.total_ns(C.read_fct(tmp_path / "fct_mvopt.txt")) == total
    assert D.mvopt_totals(tmp_path, cfg, 2, "cpu")[0] == total
    assert T.main([str(tmp_path)]) == 0
    end_us = float(capsys.readouterr().out.splitlines()[-1].split()[1])
    assert end_us == pytest.approx(total / 1e3, abs=1e-3)
