"""Links going down during the run (cluster.link_down; docs/engine.md, "Links going down"): the
traffic moves to the remaining paths and the iteration completes; down at time 0 is the static
failed_links result; every backend (and the CPU's two switch schedules) equals the reference
simulator; the fields are checked."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder, simulate
from mvopt.engine.reference import simulate_reference
from mvopt.errors import ConfigError

from engine_cases import assert_matches_reference, differences

FAT_TREE = {"topology": "fat_tree", "k": 4, "gpus_per_server": 1}
# k = 4: hosts 0..15, edges 16..23, aggregations 24..31 (pod p: 24+2p, 25+2p), cores 32..35;
# tier-2 link 0 joins aggregation 0 of pod 0 (node 24) to core 0 (node 32)
AGG0, CORE0, CORE1 = 24, 32, 33


def _topo(**cluster):
    return build_topology(load_config({"cluster": {**FAT_TREE, **cluster}}).cluster)


def _port(topo, a: int, b: int) -> np.ndarray:
    return np.flatnonzero((topo.port_node == a) & (topo.port_peer_node == b))


def _exp(topo, lb: str = "ecmp", cc: str = "dcqcn", name: str = "e", size: int = 100_000, **net) -> Experiment:
    """Every host sends to the host 4 further on (pod p to pod p + 1): half the flows cross the cores."""
    g = TaskGraphBuilder()
    for src in range(16):
        g.flow(src, (src + 4) % 16, size)
    cfg = load_config({"cluster": FAT_TREE, "network": {"cc": cc, "lb": lb, **net}})
    return Experiment(topology=topo, network=cfg.network, tasks=g.build(), name=name, seed=3)


@pytest.mark.parametrize("lb", ["ecmp", "spray", "adaptive"])
def test_down_at_time_zero_is_the_failed_link(backend, lb: str) -> None:
    """The routes without the link from time 0 are the static failure's (the same next hops in the
    same order and hash), so every task, flow and counter is the same; the down link's ports send nothing."""
    failed, down = _exp(_topo(failed_links=[[2, 0]]), lb), _exp(_topo(link_down=[[2, 0, 0]]), lb)
    a, b = simulate([failed, down], backend=backend)
    assert a.ok and b.ok
    assert np.array_equal(a.task_finish_ps, b.task_finish_ps) and np.array_equal(a.flow_fct_ps, b.flow_fct_ps)
    assert a.counters == b.counters and a.makespan_ps == b.makespan_ps
    topo = down.topology
    dead = np.concatenate([_port(topo, AGG0, CORE0), _port(topo, CORE0, AGG0)])
    assert b.port_tx_bytes[dead].sum() == 0


@pytest.mark.parametrize("lb", ["ecmp", "spray", "adaptive"])
def test_traffic_moves_to_the_remaining_paths_and_the_iteration_completes(backend, lb: str) -> None:
    """Down at 5 us, mid-transfer: what reaches the link's far end from then on is lost and
    repaired by the transport; afterwards aggregation 0 of pod 0 sends up through core 1 only;
    every flow completes, later than with the link up."""
    whole, down = _exp(_topo(), lb), _exp(_topo(link_down=[[2, 0, 5000]]), lb)
    a, b = simulate([whole, down], backend=backend)
    assert a.ok and b.ok and (b.flow_fct_ps > 0).all()
    assert b.makespan_ps > a.makespan_ps
    assert b.counters["data_packets_dropped"] > 0 and b.counters["data_packets_retransmitted"] > 0
    assert a.counters["data_packets_dropped"] == 0
    topo = down.topology
    up0, up1 = (b.port_tx_bytes[_port(topo, AGG0, c)].sum() for c in (CORE0, CORE1))
    assert up1 > up0 > 0   # core 0 until 5 us, core 1 for the rest


def test_every_schedule_and_backend_equals_the_reference(backend) -> None:
    """Links going down one after the other (a spine link, then an edge uplink), with and without
    PFC, ECMP, spraying and adaptive routing, in one batch with an experiment without: each equals
    the reference bit for bit; on the CPU also with every switch window on the serial loop."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import extract_results

    two = _topo(link_down=[[2, 0, 3000], [1, 1, 6000]])
    exps = [_exp(two, "ecmp", name="ecmp"), _exp(two, "spray", "hpcc", name="spray-hpcc"),
            _exp(two, "adaptive", "dctcp", name="adaptive-lossy", pfc={"enabled": False}, buffer_mb=0.5),
            _exp(_topo(link_down=[[2, 3, 2000]]), "spray", "none", name="spray-gbn", transport="gbn"),
            _exp(_topo(), "ecmp", name="healthy")]
    results = simulate(exps, backend=backend)
    refs = [simulate_reference(e) for e in exps]
    for r, e, ref in zip(results, exps, refs):
        assert r.ok, e.name
        assert_matches_reference(r, e, ref)
    if backend == "cpu":
        batch = build_batch(exps)
        serial = extract_results(batch, CpuBackend(switch_schedule="serial").run(batch))
        for r, s, e in zip(results, serial, exps):
            assert r.same_as(s), f"{e.name}: " + "; ".join(differences(r, s))


def test_a_pause_over_a_dead_link_is_lost_and_a_resume_lifts_it() -> None:
    """An incast into pod 1 with PFC and a small buffer pauses the spine; the spine link going down
    while the queues are full must not leave a port paused for good: the iteration completes,
    as in the reference."""
    g = TaskGraphBuilder()
    for src in range(16):
        if src // 4 != 1:
            g.flow(src, 4, 200_000)
    topo = _topo(link_down=[[2, 0, 8000]])
    cfg = load_config({"cluster": FAT_TREE, "network": {"cc": "none", "lb": "ecmp", "buffer_mb": 0.2}})
    exp = Experiment(topology=topo, network=cfg.network, tasks=g.build(), name="incast", seed=1)
    (r,) = simulate([exp], backend="cpu")
    assert r.ok and r.counters["pfc_pauses"] > 0
    assert_matches_reference(r, exp)


@pytest.mark.parametrize("cluster, message", [
    ({"link_down": [[2, 16, 0]]}, "names link 16 of tier 2, which does not exist"),
    ({"link_down": [[2, 0, 0]], "failed_links": [[2, 0]]}, "names a link that failed_links removes"),
    ({"link_down": [[0, 0, 0]]}, "a host link cannot fail"),
    ({"link_down": [[2, 0, 0]] * 5}, "at most 4"),
    ({"link_down": [[2, 0, -1]]}, "at_ns >= 0"),
    ({"link_down": [[1, 0, 0], [1, 1, 10]]}, "leave the network without a path"),
])
def test_bad_link_down_is_refused(cluster: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _topo(**cluster)
    assert message in str(e.value) and "cluster.link_down" in str(e.value)


def test_the_flow_level_refuses_links_going_down() -> None:
    exp = _exp(_topo(link_down=[[2, 0, 5000]]))
    from mvopt.flow import simulate as simulate_flow
    with pytest.raises(ConfigError, match="cluster.link_down: must be empty with simulation.fidelity: flow"):
        simulate_flow([exp])


def test_a_saved_topology_keeps_its_links_going_down(tmp_path) -> None:
    from mvopt.cluster import CompiledTopology
    topo = _topo(link_down=[[2, 0, 5000], [1, 2, 700]])
    assert [d[0] for d in topo.link_down] == [700_000, 5_000_000]     # by time
    topo.save(tmp_path / "t.npz")
    assert CompiledTopology.load(tmp_path / "t.npz").link_down == topo.link_down
