"""simulation.fidelity: each configuration of a batch is simulated at its own level."""

from __future__ import annotations

from mvopt.build import build, run
from mvopt.config import load_config
from mvopt.engine import simulate as simulate_packets
from mvopt.flow import simulate as simulate_flows


def _config(fidelity: str):
    return load_config({"name": f"ring-{fidelity}", "cluster": {"topology": "fat_tree", "k": 4},
                        "workload": {"kind": "collective"},
                        "collective": {"op": "all_reduce", "bytes": 1 << 20, "algorithm": "ring"},
                        "simulation": {"fidelity": fidelity}})


def test_a_mixed_batch_runs_each_configuration_at_its_fidelity() -> None:
    flow, packet = _config("flow"), _config("packet")
    mixed = run([flow, packet, flow], backend="cpu")
    alone_flow = simulate_flows([build(flow).experiment], backend="cpu")[0]
    alone_packet = simulate_packets([build(packet).experiment], backend="cpu")[0]
    for r in (mixed[0], mixed[2]):
        assert r.makespan_ps == alone_flow.makespan_ps
        assert list(r.task_finish_ps) == list(alone_flow.task_finish_ps)
    assert mixed[1].makespan_ps == alone_packet.makespan_ps
    assert list(mixed[1].task_finish_ps) == list(alone_packet.task_finish_ps)
    # the two levels are different models: the packet level's answer is not the flow level's
    assert mixed[1].makespan_ps != alone_flow.makespan_ps
