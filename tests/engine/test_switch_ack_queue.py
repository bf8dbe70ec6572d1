"""Where ACK/NACKs wait: network.switch_ack_queue, ahead of data at switches (priority) or queued
with it (data, the HPCC simulator's switches), a hand-checked case; network.pfc.pause_host_acks,
a host's ACKs stopped by a PAUSE. Every backend, each equal to the reference (the random
experiments of test_engine_reference.py draw both options too)."""

from __future__ import annotations

import pytest

from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder
from mvopt.errors import ConfigError
from mvopt.testing import scenarios as sc

from engine_cases import A_ACK, D, T, assert_matches_reference, compiled, run1

N = 40   # packets of each incast flow: the queue holds 26 when the ACK arrives


def incast_and_reply(queue: str):
    """Star of 3 hosts on switch 3: hosts 0 and 2 send N full packets each to host 1 from 0
    (their packets reach the switch two per T, its port to host 1 sends one per T: a queue
    builds); host 1 sends one full packet to host 0 at 0 (flow 2), whose ACK goes back to
    host 1 through that port."""
    g = TaskGraphBuilder()
    g.flow(0, 1, N * 1000)
    g.flow(2, 1, N * 1000)
    g.flow(1, 0, 1000)
    return sc.experiment(compiled(sc.star(3)), g, cc="none", switch_ack_queue=queue)


@pytest.mark.parametrize("queue", ["priority", "data"])
def test_an_ack_waits_behind_data_at_a_switch_only_when_queued_with_it(backend, queue: str) -> None:
    """Flow 2's packet leaves host 1 at 0, is forwarded at T + D, reaches host 0 at 2T + 2D
    (25.85 T): host 0 is sending its flow's packet 25 (25T..26T), so the ACK leaves at 26T and
    reaches the switch at 26T + A + D. Host k's packet j reached the switch at (j+1)T + D and
    the port to host 1 starts its transmission i at (i+1)T + D, one after another: by the ACK's
    arrival 52 packets came and 26 started, 26 wait.
    priority: the ACK goes after the transmission in progress, at 27T + D;
    data: after the 26 waiting, at 53T + D, 26T later. It reaches host 1 one A + D later."""
    exp = incast_and_reply(queue)
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    ack_leaves_switch = D + (53 if queue == "data" else 27) * T
    assert int(r.flow_fct_ps[2]) == ack_leaves_switch + A_ACK + D
    assert r.counters["data_packets_dropped"] == r.counters["pfc_pauses"] == 0
    assert_matches_reference(r, exp)


def test_the_incast_flows_are_unchanged_by_where_the_ack_waits(backend) -> None:
    """The ACK takes A of the port's time either way, so the incast's last delivery moves by the
    same A in both, and only flow 2's completion differs."""
    prio, data = (run1(backend, incast_and_reply(q)) for q in ("priority", "data"))
    assert prio.task_finish_ps[:2].tolist() == data.task_finish_ps[:2].tolist()
    assert int(data.flow_fct_ps[2]) - int(prio.flow_fct_ps[2]) == 26 * T


def test_an_unknown_switch_ack_queue_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"network\.switch_ack_queue.*'priority'.*'data'"):
        load_config({"network": {"switch_ack_queue": "high"}})


@pytest.mark.parametrize("start", [3 * D, 8 * D])
def test_a_pause_stops_a_hosts_acks_only_with_pause_host_acks(backend, start: int) -> None:
    """Hosts 0 and 2 send 400 KB each to host 1 through a 0.05 MB switch with PFC: the switch
    pauses them again and again. Host 1's one packet to host 0 (flow 2, from `start`) reaches
    host 0 while it is paused: with pause_host_acks its ACK waits for the RESUME, so flow 2 ends
    later; the kernels equal the reference either way."""
    fct = {}
    for pause in (False, True):
        g = TaskGraphBuilder()
        g.flow(0, 1, 400_000)
        g.flow(2, 1, 400_000)
        g.flow(1, 0, 1000, start_ps=start)
        exp = sc.experiment(compiled(sc.star(3)), g, cc="none", buffer_mb=0.05, switch_ack_queue="data",
                            pfc={"enabled": True, "pause_host_acks": pause})
        r = run1(backend, exp)
        assert r.status == "done" and r.counters["pfc_pauses"] > 0
        assert_matches_reference(r, exp)
        fct[pause] = int(r.flow_fct_ps[2])
    assert fct[True] > fct[False]
