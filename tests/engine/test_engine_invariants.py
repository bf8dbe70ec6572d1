"""The SPME engine's invariants (every backend): conservation, bounds, results that do not
depend on the batch, on the threads, on stopping and continuing a run, or on the pull-vs-lock
ablation.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
import pytest

from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder, simulate
from mvopt.engine.params import ser_ps
from mvopt.testing import scenarios as sc

from engine_cases import (
    ACK, D, HEADER, PAYLOAD, RATE, idle_gap_experiment, assert_matches_reference, batch_mix, check_invariants,
    cluster, differences, experiments, fat_tree, flows, ideal_fct, incast, run, run1, same_everything)


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(experiments())
def test_random_experiments_keep_the_invariants(backend, exp) -> None:
    r = run1(backend, exp)
    check_invariants(exp, r)
    again = run1(backend, exp)                     # repeated runs are identical
    assert again.same_as(r) and again.windows == r.windows and again.diagnostic == r.diagnostic


def test_standalone_time_is_not_a_lower_bound(backend) -> None:
    """``flow_standalone_ps`` = base RTT + ser(all wire bytes at the bottleneck), base RTT = 2 sum d
    + sum_h ser(payload). A lone flow of n full packets over H equal hops takes n T + (H-1) T +
    2 H d + H ser(ack) (closed form above): the standalone time charges one full payload per hop
    for the pipeline fill where the real fill is (H-1) full packets, and ignores the ACK's
    serialization; so it exceeds the true FCT by 80 ps x (payload - (H-1) header - H ack) at
    100 Gb/s: 66.56 ns over 2 hops, 32 ns over 6. Slowdowns (clamped at 1) hide it; FCTs are
    checked against the exact idle-path ideal instead."""
    topo = fat_tree()
    for dst, hops in ((1, 2), (4, 6)):
        exp = flows(topo, [(0, dst)], 10 * PAYLOAD)
        r = run1(backend, exp)
        gap = ser_ps(PAYLOAD - (hops - 1) * HEADER - hops * ACK, RATE)
        assert r.flow_fct_ps[0] == ideal_fct(topo, exp.params, 0, 0, dst, 10 * PAYLOAD)
        assert r.flow_standalone_ps[0] - r.flow_fct_ps[0] == gap > 0


def test_results_do_not_depend_on_the_batch(backend) -> None:
    exps = batch_mix()
    alone = [run1(backend, e) for e in exps]
    assert [r.status for r in alone] == ["done"] * 4 + ["stuck", "timeout"]
    n = len(exps)
    orders = [list(range(k, n)) + list(range(k)) for k in range(n)]       # every position
    orders += [o[::-1] for o in orders[:2]]
    for order in orders:
        together = run(backend, *[exps[i] for i in order])
        for i, r in zip(order, together):
            assert same_everything(r, alone[i]), f"{exps[i].name} at position {order.index(i)} of {order}"


def test_identical_experiments_in_one_batch(backend) -> None:
    for exp in batch_mix()[:3]:
        rs = run(backend, exp, exp, exp)
        assert same_everything(rs[0], rs[1]) and same_everything(rs[1], rs[2])
        assert same_everything(rs[0], run1(backend, exp))


@pytest.mark.parametrize("lock", [1, 2], ids=["receiver-lock", "global-lock"])
def test_push_lock_ablation_changes_nothing_but_time(lock: int) -> None:
    """The pull-vs-locks ablation's builds (every packet written under a lock) give the model's
    results, bit for bit, also with several threads sharing one experiment's nodes."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import extract_results

    locked = CpuBackend(threads=2, defines={"MV_PUSH_LOCK": lock})
    if not locked.openmp:
        pytest.skip("the compiler has no OpenMP: one thread only")
    # a batch of small experiments (one thread each), then a k=16 fat-tree (1,344 nodes) whose
    # nodes the two threads share: an incast into host 0 and a shifted permutation
    topo = cluster(topology="fat_tree", k=16)
    g = TaskGraphBuilder()
    for s in range(1, 9):
        g.flow(64 * s, 0, 60_000)
    for h in range(0, 1024, 37):
        g.flow(h, (h + 300) % 1024, 30_000)
    big = Experiment(topology=topo, network=load_config({}).network, tasks=g.build(), name="k16")
    for group in (sc.mixed_experiments(6), [big]):
        batch = build_batch(group)
        assert locked.threads_for(batch) == 2
        for a, b in zip(simulate(group, backend="cpu"), extract_results(batch, locked.run(batch))):
            assert a.same_as(b), a.name


def test_a_stopped_run_continues_on_any_backend_after_other_runs(backend) -> None:
    """A run stopped early (max_iters) keeps its state and its packets in flight on the batch:
    running the batch again continues it, even after the same backend ran another batch (whose
    packets reuse the backend's working memory) and on the other backend, and it ends as the
    reference does."""
    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import extract_results

    exps = [idle_gap_experiment(), incast("dctcp", 200_000)]
    # (stop on, continue on): this backend alone, and across backends both ways
    for first, other in dict.fromkeys([(backend, backend), (backend, "cpu"), ("cpu", backend)]):
        batch = build_batch(exps)
        get_backend(first).run(batch, max_iters=3)        # packets in flight in both
        assert batch.scratch is not None and (batch.cols["exp_status"] == 0).all()
        get_backend(other).run(build_batch([exps[1]]))    # another batch in the same memory
        iters = 3 + get_backend(other).run(batch)
        assert batch.scratch is None
        for r, exp in zip(extract_results(batch, iters), exps):
            assert r.status == "done", f"stopped on {first}, continued on {other}: {r.status}"
            assert_matches_reference(r, exp)


def test_quiet_switches_skip_their_windows_and_change_nothing(backend) -> None:
    """A switch that processed no event in a window that left it nothing pending skips the next
    windows until a packet reaches one of its in-rings (kernels/mv_step.cuh, switch_quiet). Here
    the network is idle for 40 windows between two flows: in the middle of them every switch is
    quiet, and the run, stopped there and carried on, ends as the reference does."""
    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import INF_PS, extract_results

    exp = idle_gap_experiment()
    batch = build_batch([exp])
    be = get_backend(backend)
    be.run(batch, max_iters=25)
    nh = int(exp.topology.n_host)
    assert batch.cols["exp_status"][0] == 0 and batch.cols["node_quiet"][nh:].all()
    assert (batch.cols["node_next_ps"][nh:] >= INF_PS).all()
    iters = 25 + be.run(batch)
    (r,) = extract_results(batch, iters)
    assert r.status == "done" and r.windows > 40
    assert_matches_reference(r, exp)


def test_a_lone_experiment_on_several_threads_equals_it_in_a_batch() -> None:
    """A batch of one large experiment runs its nodes on all threads, which also reduce their
    nodes' reports (mv_step_one); in a batch of several, one thread runs it whole, reduced by
    advance_exp (mv_run_by_experiment). Same results, windows and end."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import extract_results

    two = CpuBackend(threads=2)
    if not two.openmp:
        pytest.skip("the compiler has no OpenMP: one thread only")
    g = TaskGraphBuilder()
    for s in range(1, 9):
        g.flow(64 * s, 0, 60_000)
    for h in range(0, 1024, 37):
        g.flow(h, (h + 300) % 1024, 30_000, after=[0] if h % 2 else [])
    g.delay(5, 3 * D, after=[1])
    big = Experiment(topology=cluster(topology="fat_tree", k=16), network=load_config({}).network, tasks=g.build(),
                     name="k16")
    alone = build_batch([big])
    assert two.threads_for(alone) == 2
    (a,) = extract_results(alone, two.run(alone))
    pair = build_batch([big, incast("dcqcn", 100_000)])
    b = extract_results(pair, two.run(pair))[0]
    assert a.same_as(b) and a.windows == b.windows and a.end_ps == b.end_ps, "; ".join(differences(a, b))
    assert a.status == "done"
