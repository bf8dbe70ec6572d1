"""The GPU's launch modes (one launch with per-experiment windows; one cooperative launch with
grid-wide barriers; one launch per phase replayed as a CUDA graph; a block per group of
experiments, barriers inside the block) give identical results,
equal to the CPU's, also when a run is cut into many short launches. Skipped without CuPy and
a GPU."""

from __future__ import annotations

import pytest

from mvopt.engine import build_batch, get_backend, simulate
from mvopt.engine.batch import extract_results
from mvopt.testing.backends import available_backends
from mvopt.testing.scenarios import mixed_experiments

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif("gpu" not in available_backends(), reason="needs CuPy and a GPU")]


def test_every_launch_mode_matches_the_cpu() -> None:
    from mvopt.engine._gpu import LAUNCH_MODES, GpuBackend

    EXPS = mixed_experiments(9)
    cpu = simulate(EXPS, backend="cpu")
    for launch in LAUNCH_MODES:
        be = GpuBackend(launch=launch)
        batch = build_batch(EXPS)
        res = extract_results(batch, be.run(batch))
        assert all(a.same_as(b) for a, b in zip(cpu, res)), launch


def test_async_launches_pause_and_resume_cleanly(monkeypatch) -> None:
    """A 10 us budget per launch stops the threads between windows of different experiments
    many times over; the run must still end with the CPU's results."""
    from mvopt.engine import _gpu

    monkeypatch.setattr(_gpu, "ASYNC_LAUNCH_NS", 10_000)
    EXPS = mixed_experiments(6)
    cpu = simulate(EXPS, backend="cpu")
    batch = build_batch(EXPS)
    res = extract_results(batch, _gpu.GpuBackend(launch="async").run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res))


def test_group_launches_pause_and_resume_cleanly(monkeypatch) -> None:
    """The groups mode with a 10 us budget and one window per first launch stops its blocks
    between windows many times over; also a run stopped early (max_iters) and continued on the
    CPU. Both end with the CPU's results."""
    from mvopt.engine import _gpu

    monkeypatch.setattr(_gpu, "ASYNC_LAUNCH_NS", 10_000)
    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    be = _gpu.GpuBackend(launch="groups")
    batch = build_batch(exps)
    res = extract_results(batch, be.run(batch, chunk_iters=1))
    assert be.last_timing["launch"] == "groups"
    assert all(a.same_as(b) for a, b in zip(cpu, res))
    batch = build_batch(exps)
    iters = be.run(batch, max_iters=5)
    assert batch.scratch is not None
    iters += get_backend("cpu").run(batch)
    assert all(a.same_as(b) for a, b in zip(cpu, extract_results(batch, iters)))


def test_a_run_continued_on_the_gpu_after_an_experiment_ended_early() -> None:
    """A run stopped (max_iters) after one experiment ended and continued on the GPU, in groups
    and graph: the cap rises from the experiments still running (it rose from the ended one's
    window count, below every running experiment: a launch with nothing to do)."""
    from mvopt.engine._gpu import GpuBackend
    from mvopt.testing.scenarios import fat_tree_flows

    exps = [fat_tree_flows([(0, 5)], 20_000), fat_tree_flows([(s, 0) for s in range(1, 16)], 1_000_000)]
    cpu = simulate(exps, backend="cpu")
    stop = cpu[0].windows + 400
    assert cpu[1].windows > stop
    for launch in ("groups", "graph"):
        be = GpuBackend(launch=launch)
        batch = build_batch(exps)
        iters = be.run(batch, max_iters=stop)
        assert list(batch.cols["exp_status"]) == [1, 0]     # the first ended, the second runs
        iters += be.run(batch)
        assert all(a.same_as(b) for a, b in zip(cpu, extract_results(batch, iters))), launch


def test_groups_of_one_experiment_and_too_large_experiments(monkeypatch) -> None:
    """Blocks of a warp or two (MV_GROUP_BLOCK 32: about one experiment each, the block size is
    that of the widest experiment), and a batch with an experiment beyond the largest block, which runs in the
    graph mode."""
    from mvopt.engine import _gpu

    exps = mixed_experiments(5)
    cpu = simulate(exps, backend="cpu")
    widest = max(int(n) for n in (lambda b: b.cols["exp_node_hi"] - b.cols["exp_node_lo"])(build_batch(exps)))
    for limit, launch in ((512, "groups"), (widest - 1, "graph")):
        monkeypatch.setattr(_gpu, "GROUP_THREADS_MAX", limit)
        be = _gpu.GpuBackend(launch="groups", defines={"MV_GROUP_BLOCK": 32})
        batch = build_batch(exps)
        res = extract_results(batch, be.run(batch))
        assert be.last_timing["launch"] == launch
        assert all(a.same_as(b) for a, b in zip(cpu, res)), launch


def test_every_groups_launch_moves_an_experiment_forward(monkeypatch) -> None:
    """A launch whose budget is spent at once (1 ns) still runs a window of a running experiment:
    a block takes no more slices once the budget is spent only after it ran one, so the slices
    of groups whose experiments all ended (the first slices of every launch, here, once the
    shortest experiment, first in the batch, has ended) cannot use up a launch (it stopped with
    "no progress", experiments/stress_groups_gpu.py). One block, slices of one window: the
    CPU's results."""
    from mvopt.engine import _gpu

    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    order = sorted(range(len(exps)), key=lambda j: cpu[j].makespan_ps)
    exps, cpu = [exps[j] for j in order], [cpu[j] for j in order]
    monkeypatch.setattr(_gpu, "ASYNC_LAUNCH_NS", 1)
    be = _gpu.GpuBackend(launch="groups", group_slice_windows=1, defines={"MV_GROUP_BLOCK": 32})
    be._groups_resident = lambda kernel, threads, smem: 1
    batch = build_batch(exps)
    res = extract_results(batch, be.run(batch))
    assert be.last_timing["launch"] == "groups" and be.last_timing["blocks"] == 1
    assert all(a.same_as(b) for a, b in zip(cpu, res))


def test_groups_take_turns_on_a_small_grid(monkeypatch) -> None:
    """More groups than resident blocks (here: a grid of two, slices of three windows): the
    blocks take slices from the queue, each after its group's previous slice ended elsewhere;
    with short launch budgets too. The CPU's results."""
    from mvopt.engine import _gpu

    monkeypatch.setattr(_gpu, "GROUP_SLICE_WINDOWS", 3)
    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    for budget_ns in (_gpu.ASYNC_LAUNCH_NS, 20_000):
        monkeypatch.setattr(_gpu, "ASYNC_LAUNCH_NS", budget_ns)
        be = _gpu.GpuBackend(launch="groups", defines={"MV_GROUP_BLOCK": 32})
        be._groups_resident = lambda kernel, threads, smem: 2
        batch = build_batch(exps)
        res = extract_results(batch, be.run(batch, chunk_iters=7))
        assert be.last_timing["launch"] == "groups" and be.last_timing["blocks"] == 2
        assert all(a.same_as(b) for a, b in zip(cpu, res)), budget_ns


@pytest.mark.parametrize("ordered", [False, True])
def test_groups_on_one_block_per_sm_with_slices_of_two_windows(ordered: bool) -> None:
    """The groups mode's knobs (group_slice_windows, group_order) on a grid of one block per SM
    change no result."""
    from mvopt.engine._gpu import GpuBackend

    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    be = GpuBackend(launch="groups", group_slice_windows=2, group_order=ordered, defines={"MV_GROUP_BLOCK": 32})
    be._groups_resident = lambda kernel, threads, smem: be.sms
    batch = build_batch(exps)
    res = extract_results(batch, be.run(batch, chunk_iters=5))
    assert be.last_timing["launch"] == "groups"
    assert all(a.same_as(b) for a, b in zip(cpu, res))
    batch = build_batch(exps)
    res = extract_results(batch, GpuBackend(launch="groups", group_order=ordered).run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res))


def test_auto_runs_groups_where_experiments_fit_a_block_and_graph_beyond() -> None:
    """The default launch mode: groups for experiments of at most MV_THREADS nodes (here 36),
    graph for a batch with a wider one (blocks of 32 threads)."""
    from mvopt.engine import _gpu

    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    for threads, launch in ((128, "groups"), (32, "graph")):
        be = _gpu.GpuBackend(defines={"MV_THREADS": threads})
        assert be.launch == "auto"
        batch = build_batch(exps)
        res = extract_results(batch, be.run(batch))
        assert be.last_timing["launch"] == launch
        assert all(a.same_as(b) for a, b in zip(cpu, res)), launch


def test_switch_event_selection_paths_match_the_cpu() -> None:
    """The GPU's scan, tree and rescan paths (small limits put this batch's switches on all
    three, as in test_engine.test_switch_event_selection_paths_agree) give the CPU's results."""
    from mvopt.engine._gpu import GpuBackend

    exps = mixed_experiments(12)
    cpu = simulate(exps, backend="cpu")
    batch = build_batch(exps)
    res = extract_results(batch, GpuBackend(defines={"MV_CACHE_PORTS": 5, "MV_TREE_PORTS": 3}).run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res))


@pytest.mark.parametrize("defines", [{"MV_FLOW_PATHS": 0}, {"MV_HASH_PREFIX": 0}, {"MV_LATE_NEXT_ARRIVAL": 1},
                                     {"MV_PORT_CLASS_AGAIN": 0}, {"MV_EVENT_PAIRS": 0}, {"MV_SWITCH_LANES": 1},
                                     {"MV_SWITCH_LANES": 0}, {"MV_SWITCH_LANES": 2, "MV_GROUP_BLOCK": 100},
                                     {"MV_LANES_SWITCH_CALL": 0},
                                     {"MV_LANES_ROWS_BY_SWITCH": 0, "MV_GROUP_BLOCK": 100},
                                     {"MV_LANE_POOL_REGS": 0, "MV_SCAN_SMALL": 0}])
def test_switch_shortcut_variants_match_the_cpu(defines: dict) -> None:
    """The GPU without the flows' paths or the hash prefixes, with the late next-arrival cache,
    with the cached transmission class (the CPU's default), with one event per turn of a
    switch's event loop, with switch windows port by port on one thread (MV_SWITCH_LANES 1) and
    serially (0; the default, 2, runs each port on a thread of its own in the groups mode, also
    in groups of 100 threads, launched in blocks rounded up to whole warps), and the GPU-only
    variants of the lanes kernel: every window inlined (MV_LANES_SWITCH_CALL 0; the default
    calls the switches' serial windows), the tasks' rows port-major in groups of 100 threads
    (MV_LANES_ROWS_BY_SWITCH 0; the default is switch-major), the port tasks' free lists and the
    small scans' state in memory (MV_LANE_POOL_REGS 0, MV_SCAN_SMALL 0: the GPU's defaults are
    1): the CPU's results. (The
    CPU tests the variants of the code it shares: MV_LANE_TIMES, MV_LANE_SMALL, MV_SCAN_SMALL,
    MV_LANE_WIRE_ONCE, MV_LANE_POOL_REGS; and profile_gpu.py checks each variant's results on the
    GPU against the first variant's.)"""
    from mvopt.engine._gpu import GpuBackend

    exps = mixed_experiments(12)
    cpu = simulate(exps, backend="cpu")
    batch = build_batch(exps)
    res = extract_results(batch, GpuBackend(defines=defines).run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res))


@pytest.mark.parametrize("defines", [{}, {"MV_LANES_SWITCH_CALL": 0}])
def test_wide_switches_run_port_by_port_on_the_gpu(defines: dict) -> None:
    """Rail-optimised clusters (rail switches of 16 and 32 ports, wider than the thread-local
    caches: their serial windows keep persisted caches, refilled after a window run port by port)
    in the groups mode, each port of a switch on a thread of its own, ECMP and spraying, DCQCN,
    with the serial windows through a call (the default) and inlined: the CPU's results."""
    from mvopt.engine._gpu import GpuBackend
    from mvopt.testing.scenarios import rail_allreduce

    exps = [rail_allreduce("dcqcn", "ecmp"), rail_allreduce("none", "spray"), rail_allreduce("dcqcn", "ecmp", 16)]
    cpu = simulate(exps, backend="cpu")
    batch = build_batch(exps)
    res = extract_results(batch, GpuBackend(launch="groups", defines=defines).run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res))


def test_l2_fetch_granularity_is_a_hint_set_for_the_run_only() -> None:
    """`l2_fetch_bytes` (a device limit) changes no result and is restored after the run."""
    import cupy

    from mvopt.engine._gpu import L2_FETCH_LIMIT_ID, GpuBackend

    before = cupy.cuda.runtime.deviceGetLimit(L2_FETCH_LIMIT_ID)
    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    for fetch in (32, 128):
        batch = build_batch(exps)
        res = extract_results(batch, GpuBackend(l2_fetch_bytes=fetch).run(batch))
        assert all(a.same_as(b) for a, b in zip(cpu, res)), fetch
        assert cupy.cuda.runtime.deviceGetLimit(L2_FETCH_LIMIT_ID) == before


def test_timing_the_phases_apart_changes_no_result() -> None:
    """time_phases launches each kernel directly between two events: the CPU's results, and
    GPU seconds for both kernels."""
    from mvopt.engine._gpu import GpuBackend

    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    batch = build_batch(exps)
    be = GpuBackend(launch="graph", time_phases=True)
    res = extract_results(batch, be.run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res)) and not be.graph_used
    assert be.last_timing["phase_s"]["window"] > 0 and be.last_timing["phase_s"]["advance"] > 0


def test_a_smaller_resident_grid_changes_no_result() -> None:
    """Row stealing on one block (window_blocks=1): its warps take every row in turn."""
    from mvopt.engine._gpu import GpuBackend

    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    batch = build_batch(exps)
    res = extract_results(batch, GpuBackend(launch="graph", steal=True, window_blocks=1).run(batch))
    assert all(a.same_as(b) for a, b in zip(cpu, res))


@pytest.mark.parametrize("steal", [True, False])
def test_stealing_rows_and_the_widest_first_order_match_the_cpu(steal: bool, monkeypatch) -> None:
    """The graph mode's window kernel on a resident grid whose warps take rows from a counter
    (the default when a batch needs several waves of blocks, then with the widest nodes first:
    forced here on a small batch), and on a full grid, give the CPU's results."""
    from mvopt.engine._gpu import GpuBackend

    monkeypatch.delenv("MVOPT_NODE_ORDER", raising=False)
    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    be = GpuBackend(launch="graph", steal=steal)
    for blocks in (1, 1000):     # a grid of one block: each warp takes many rows
        be.window_resident_blocks = blocks
        batch = build_batch(exps)
        res = extract_results(batch, be.run(batch))
        assert all(a.same_as(b) for a, b in zip(cpu, res)), (steal, blocks)
