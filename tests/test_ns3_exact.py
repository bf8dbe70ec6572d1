"""mvopt against mainline ns-3 on one small line-rate case: identical to the picosecond.

The harness is experiments/ns3/ (see its README); this runs its smallest exact scenario, a
single flow across 2 hops of a k=4 fat-tree (11 packets, the last one short), through both
simulators. Skipped, with the reason, where the ``ns3`` package (``pip install --no-deps
ns3==3.44.post0``) or g++ is missing. The scenario program is compiled once per session and
cached by source hash (experiments/ns3/build.py).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "experiments" / "ns3"

pytestmark = pytest.mark.ns3


def _load(name: str):
    if str(HARNESS) not in sys.path:
        sys.path.insert(0, str(HARNESS))       # compare.py imports build.py by name
    spec = importlib.util.spec_from_file_location(f"ns3_harness_{name}", HARNESS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module            # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def ns3_binary() -> Path:
    build = _load("build")
    reason = build.unavailable_reason()
    if reason:
        pytest.skip(f"ns-3 comparison unavailable: {reason}")
    return build.build()


@pytest.mark.parametrize("size", [10_007])
def test_single_flow_two_hops_matches_ns3_to_the_picosecond(ns3_binary: Path, size: int) -> None:
    from mvopt.build import build_experiment
    from mvopt.config import load_config
    from mvopt.engine import simulate
    from mvopt.engine.params import ser_ps

    compare = _load("compare")
    cfg = {"cluster": compare.fat_tree(4), "network": compare.NET_EXACT,
           "workload": {"kind": "tasks", "tasks": [{"id": "f", "src": 0, "dst": 1, "bytes": size,
                                                     "start_ns": 3}]}}
    exp = build_experiment(load_config(cfg))
    res, = simulate([exp])
    assert res.status == "done", res.diagnostic
    ns = compare.run_ns3(exp, "exact", binary=ns3_binary)
    assert ns.start.tolist() == res.task_start_ps.tolist() == [3000]
    assert ns.finish.tolist() == res.task_finish_ps.tolist()
    assert ns.fct_end.tolist() == (res.task_start_ps + res.flow_fct_ps).tolist()
    # and both are the closed form: 10 full packets back to back, the short one, 2 hops of 1 us
    rate, d = 100 * 10**9, 10**6
    t_full, t_last = ser_ps(1048, rate), ser_ps(7 + 48, rate)
    assert ns.finish[0] == 3000 + 10 * t_full + (t_full + d) + t_last + d


@pytest.mark.parametrize("net, failed, negative", [
    ("NET_SPRAY", (), "spray_seed"),
    ("NET_ADAPTIVE", ((2, 0),), "tie_last"),
])
def test_routed_ring_with_selective_repeat_matches_ns3(ns3_binary: Path, net: str, failed: tuple,
                                                       negative: str) -> None:
    """A ring in a random host order on a k=4 fat-tree, data packets routed one by one (spraying;
    adaptive routing with an aggregation-core link failed), selective repeat with PFC off: every
    flow identical to the picosecond, the same packets retransmitted (reordering by 3 packets is
    taken for loss) and discarded, the same largest queue on every switch port; ns-3 routing off
    mvopt's rule (another spraying seed; the last of equal queues) differs."""
    compare = _load("compare")
    sc = compare.Scenario("ring", "exact", compare.ring_config(
        4, 8_000, getattr(compare, net) | compare.NO_PFC, compare.shuffled(4), failed))
    r = compare.compare_exact(sc, ns3_binary)
    assert r["flows"] == 16 * 30
    assert (r["max_d_start"], r["max_d_finish"], r["max_d_fct"]) == (0, 0, 0)
    assert r["exact"] == r["flows"] and r["q_equal"] == r["q_ports"]
    retx, discarded = r["counts"]["data_packets_retransmitted"], r["counts"]["out_of_order_packets"]
    assert retx[0] == retx[1] > 0 and discarded[0] == discarded[1] > 0
    assert r["ok"]
    off = compare.compare_exact(sc, ns3_binary, negative=negative)
    assert not off["ok"] and off["exact"] < off["flows"]
