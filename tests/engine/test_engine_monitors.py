"""The SPME engine's queue and link monitors (every backend).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mvopt.engine import TaskGraphBuilder
from mvopt.errors import ConfigError
from mvopt.testing import scenarios as sc

from engine_cases import (
    D, HEADER, PAYLOAD, T, assert_matches_reference, batch_mix, compiled, flows, monitored_incast, port_between,
    run, run1, without_monitors)


def test_a_lone_flow_through_an_idle_switch_never_queues(backend) -> None:
    """One flow over a star's switch, sampled every T (one full packet): each packet reaches the
    switch as its egress port becomes free and leaves at once, so the queue is empty at every
    sample (sample k = the state after every event before k T), although port_max_queue_bytes
    saw each packet between its enqueue and its dequeue at the same instant. The sender starts
    packet i at i T, so by k T it has put min(k, n) packets on the wire (a packet starting at
    k T is not counted yet); the switch starts packet i at (i + 1) T + D."""
    n = 40
    topo = compiled(sc.star(2))
    exp = flows(topo, [(0, 1)], n * PAYLOAD, queue_monitor_ps=T, link_monitor=True)
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    assert_matches_reference(r, exp)
    q, w = r.queue_samples, r.link_tx_samples
    egress = port_between(topo, 2, 1)
    assert (q == 0).all() and r.port_max_queue_bytes[egress] == PAYLOAD + HEADER
    assert q.shape == (4, r.end_ps // T + 1) and r.monitor_samples_dropped == 0    # samples from 0 to end_ps
    k = np.arange(q.shape[1])
    assert w[port_between(topo, 0, 2)].tolist() == (np.minimum(k, n) * (PAYLOAD + HEADER)).tolist()
    started = np.clip(-((T + D - k * T) // T), 0, n)          # #{i < n: (i + 1) T + D < k T}
    assert w[egress].tolist() == (started * (PAYLOAD + HEADER)).tolist()
    assert (w[:, -1] == r.port_tx_bytes).all()


def test_incast_queue_samples_in_closed_form(backend) -> None:
    """4 senders start packet j at j T; it reaches the switch at a_j = (j + 1) T + D. The egress
    to host 0 starts a packet at a_0 + i T for i < 4n (it never idles: 4 arrive per T, one
    leaves). Sample k at s = k T counts the arrivals and starts before s only, so at s = a_j the
    4 packets arriving then are not in it yet: queue(s) = (4 #{j < n: a_j < s} - #{i < 4n:
    a_0 + i T < s}) x 1048 B, 3 m packets at s = a_m. port_max_queue_bytes is larger: right after
    the last 4 arrivals, before the dequeue at the same instant (3 (n - 1) + 4 packets)."""
    senders, n = 4, 20
    exp = monitored_incast(senders, n)
    d = int(exp.topology.port_delay_ps[0])
    assert d == 12 * T
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    assert_matches_reference(r, exp)
    egress = port_between(exp.topology, senders + 1, 0)
    s = np.arange(r.queue_samples.shape[1]) * T
    arrived = senders * np.clip(-((d - s) // T) - 1, 0, n)
    started = np.clip(-((T + d - s) // T), 0, senders * n)
    assert r.queue_samples[egress].tolist() == ((arrived - started) * (PAYLOAD + HEADER)).tolist()
    assert r.queue_samples[egress, 13 + n] == 3 * n * (PAYLOAD + HEADER) == r.queue_samples.max()
    assert r.port_max_queue_bytes[egress] == (3 * (n - 1) + 4) * (PAYLOAD + HEADER)
    assert r.link_tx_samples[egress].tolist() == (started * (PAYLOAD + HEADER)).tolist()


def test_the_monitor_cap_keeps_the_first_samples_and_counts_the_rest(backend) -> None:
    full = monitored_incast()
    capped = dataclasses.replace(full, monitor_max_samples=25)
    one = dataclasses.replace(full, monitor_max_samples=1, link_monitor=False)
    rf, rc, r1 = run(backend, full, capped, one)
    total = rf.queue_samples.shape[1]
    assert rf.monitor_samples_dropped == 0 and total > 25
    assert rc.queue_samples.shape == rc.link_tx_samples.shape == (len(rf.port_max_queue_bytes), 25)
    assert rc.monitor_samples_dropped == total - 25 and r1.monitor_samples_dropped == total - 1
    assert np.array_equal(rc.queue_samples, rf.queue_samples[:, :25])
    assert np.array_equal(rc.link_tx_samples, rf.link_tx_samples[:, :25])
    assert (r1.queue_samples == 0).all() and r1.queue_samples.shape[1] == 1 and r1.link_tx_samples is None
    for r, exp in ((rc, capped), (r1, one)):
        assert_matches_reference(r, exp)
        assert without_monitors(r).same_as(without_monitors(rf)) and r.windows == rf.windows


def test_monitors_off_cost_no_memory_and_change_nothing(backend) -> None:
    """Off (the default): each monitor table is one unused row and results are those of a
    monitored run without its samples. On: ports x cap rows per monitor, as the planner expects."""
    from mvopt.engine.batch import build_batch
    from mvopt.engine.sizing import batch_bytes, batch_route_counts, experiment_counts

    off = [dataclasses.replace(e, queue_monitor_ps=0, link_monitor=False) for e in batch_mix()]
    on = [dataclasses.replace(e, queue_monitor_ps=D // 3, link_monitor=True, monitor_max_samples=50) for e in off]
    queue_only = [dataclasses.replace(e, link_monitor=False) for e in on]
    b_off, b_on, b_q = build_batch(off), build_batch(on), build_batch(queue_only)
    assert b_off.cols["mon_q"].size == b_off.cols["mon_w"].size == 1
    rows = b_off.counts["n_port"] * 50
    assert b_on.nbytes - b_off.nbytes == 2 * (rows - 1) * 8 and b_q.nbytes - b_off.nbytes == (rows - 1) * 8
    for exps, b in ((off, b_off), (on, b_on), (queue_only, b_q)):
        counts = [experiment_counts(e) for e in exps]
        # the planner's sum counts every routing table (an upper bound); the batch holds one per
        # topology (engine/routes.py)
        assert batch_bytes({k: sum(c[k] for c in counts) for k in counts[0]}) >= b.nbytes
        counts = batch_route_counts(exps, counts)
        assert batch_bytes({k: sum(c[k] for c in counts) for k in counts[0]}) == b.nbytes
    r_off, r_on, r_q = run(backend, *off), run(backend, *on), run(backend, *queue_only)
    for a, b, c in zip(r_off, r_on, r_q):
        assert a.queue_samples is None and a.link_tx_samples is None and a.monitor_interval_ps == 0
        assert b.queue_samples is not None and np.array_equal(b.queue_samples, c.queue_samples)
        assert c.link_tx_samples is None
        for x in (b, c):
            assert without_monitors(x).same_as(a) and x.windows == a.windows and x.diagnostic == a.diagnostic


def test_link_monitor_needs_a_sampling_period() -> None:
    exp = dataclasses.replace(flows(compiled(sc.star(2)), [(0, 1)], 1000), link_monitor=True)
    with pytest.raises(ConfigError, match="simulation.link_monitor: needs simulation.queue_monitor_ns > 0"):
        exp.params


def test_samples_after_the_last_window_of_a_timeout_are_the_final_state(backend) -> None:
    """A 1-byte flow and a delay task that ends at 50 us, past the 20 us limit: idle skipping
    jumps from the window that ends after the flow's last ACK past the limit, so the engine's
    windows end long before it. The result still holds the samples up to the limit (end_ps):
    from the last event on they are the final state, as in the reference."""
    g = TaskGraphBuilder()
    g.flow(0, 1, 1)
    g.delay(1, 50 * D)
    exp = sc.experiment(compiled(sc.line(1)), g, cc="none", time_limit_ps=20 * D, queue_monitor_ps=D // 2,
                        link_monitor=True)
    r = run1(backend, exp)
    assert r.status == "timeout" and r.end_ps == 20 * D
    assert r.queue_samples.shape[1] == 41 and r.monitor_samples_dropped == 0
    assert (r.link_tx_samples[:, 10:] == r.port_tx_bytes[:, None]).all() and r.port_tx_bytes.sum() > 0
    assert_matches_reference(r, exp)


def test_a_task_due_after_a_timeout_has_not_started(backend) -> None:
    """A task scheduled for 50 us in an experiment that times out at 20 us never started: -1, as
    in the reference (the engine reported its ready time, which task_start_ps holds as the mark
    of a scheduled task; found while extending the reference comparison to the monitors)."""
    g = TaskGraphBuilder()
    g.flow(0, 1, 1)
    g.delay(1, D, start_ps=50 * D)
    exp = sc.experiment(compiled(sc.line(1)), g, cc="none", time_limit_ps=20 * D)
    r = run1(backend, exp)
    assert r.status == "timeout" and r.task_start_ps.tolist() == [0, -1] and r.task_finish_ps[1] == -1
    assert_matches_reference(r, exp)
