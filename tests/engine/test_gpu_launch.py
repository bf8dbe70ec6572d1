"""The GPU's launch modes (the groups megakernel: a block per group of experiments, barriers
inside the block; one launch per phase replayed as a CUDA graph) give identical results, equal to
the CPU's, also when a run is cut into many short launches, and under any row of the table of
backend defaults. Skipped without CuPy and a GPU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder, build_batch, get_backend, simulate
from mvopt.engine.backend_defaults import GPU, LAUNCH_MODES
from mvopt.engine.batch import extract_results
from mvopt.testing.backends import available_backends
from mvopt.testing.scenarios import mixed_experiments

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif("gpu" not in available_backends(), reason="needs CuPy and a GPU")]


def gpu(**kw):
    from mvopt.engine._gpu import GpuBackend
    return GpuBackend(**kw)


def run_gpu(be, exps, **kw):
    batch = build_batch(exps)
    return extract_results(batch, be.run(batch, **kw))


def two_flows(cluster: dict | None = None, network: dict | None = None, name: str = "e") -> Experiment:
    """Two flows on a k=4 fat-tree: no congestion control, ECMP, go-back-N unless told otherwise."""
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4, "gpus_per_server": 1, **(cluster or {})},
                       "network": {"cc": "none", **(network or {})}})
    g = TaskGraphBuilder()
    g.flow(0, 5, 20_000)
    g.flow(3, 12, 30_000)
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), name=name)


# model features few experiments use (mixed_experiments has no flowlets or links going down)
RARE_FEATURES = {
    "adaptive": {"network": {"lb": "adaptive"}},
    "flowlet": {"network": {"lb": "adaptive", "flowlet_gap_ns": 500.0}},
    "timely": {"network": {"cc": "timely"}},
    "link_down": {"cluster": {"link_down": [[2, 0, 4000]]}},
    # ACK/NACKs and INT as the HPCC simulator has them (decisions 0144, 0145)
    "acks_with_data": {"network": {"switch_ack_queue": "data", "pfc": {"pause_host_acks": True}}},
    "int_units": {"network": {"cc": "hpcc", "hpcc": {"int_multi": 4}}},
}


def test_every_launch_mode_matches_the_cpu() -> None:
    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    for launch in LAUNCH_MODES:
        assert all(a.same_as(b) for a, b in zip(cpu, run_gpu(gpu(launch=launch), exps))), launch


def test_group_launches_pause_and_resume_cleanly() -> None:
    """The groups mode with a 10 us budget and one window per first launch stops its blocks
    between windows many times over; also a run stopped early (max_iters) and continued on the
    CPU. Both end with the CPU's results."""
    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    be = gpu(launch="groups", defaults=replace(GPU, launch_budget_ns=10_000))
    res = run_gpu(be, exps, chunk_iters=1)
    assert be.last_timing["launch"] == "groups"
    assert all(a.same_as(b) for a, b in zip(cpu, res))
    batch = build_batch(exps)
    iters = be.run(batch, max_iters=5)
    assert batch.scratch is not None
    iters += get_backend("cpu").run(batch)
    assert all(a.same_as(b) for a, b in zip(cpu, extract_results(batch, iters)))


def test_a_run_continued_on_the_gpu_after_an_experiment_ended_early() -> None:
    """A run stopped (max_iters) after one experiment ended and continued on the GPU, in groups
    and graph: the cap rises from the experiments still running (from the ended one's window
    count, below every running experiment, a launch would have nothing to do)."""
    from mvopt.testing.scenarios import fat_tree_flows

    exps = [fat_tree_flows([(0, 5)], 20_000), fat_tree_flows([(s, 0) for s in range(1, 16)], 1_000_000)]
    cpu = simulate(exps, backend="cpu")
    stop = cpu[0].windows + 400
    assert cpu[1].windows > stop
    for launch in ("groups", "graph"):
        be = gpu(launch=launch)
        batch = build_batch(exps)
        iters = be.run(batch, max_iters=stop)
        assert list(batch.cols["exp_status"]) == [1, 0]     # the first ended, the second runs
        iters += be.run(batch)
        assert all(a.same_as(b) for a, b in zip(cpu, extract_results(batch, iters))), launch


def test_groups_of_one_experiment_and_too_large_experiments() -> None:
    """Blocks of a warp or two (group_block_threads 32: about one experiment each, the block size
    is that of the widest experiment), and a batch with an experiment beyond the largest block,
    which runs in the graph mode."""
    exps = mixed_experiments(5)
    cpu = simulate(exps, backend="cpu")
    widest = max(int(n) for n in (lambda b: b.cols["exp_node_hi"] - b.cols["exp_node_lo"])(build_batch(exps)))
    for limit, launch in ((512, "groups"), (widest - 1, "graph")):
        be = gpu(launch="groups", defaults=replace(GPU, group_block_threads=32, group_threads_max=limit))
        res = run_gpu(be, exps)
        assert be.last_timing["launch"] == launch
        assert all(a.same_as(b) for a, b in zip(cpu, res)), launch


def test_every_groups_launch_moves_an_experiment_forward() -> None:
    """A launch whose budget is spent at once (1 ns) still runs a window of a running experiment:
    a block takes no more slices once the budget is spent only after it ran one, so the slices
    of groups whose experiments all ended (the first slices of every launch, here, once the
    shortest experiment, first in the batch, has ended) cannot use up a launch. One block,
    slices of one window: the CPU's results."""
    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    order = sorted(range(len(exps)), key=lambda j: cpu[j].makespan_ps)
    exps, cpu = [exps[j] for j in order], [cpu[j] for j in order]
    be = gpu(launch="groups", defaults=replace(GPU, launch_budget_ns=1, group_slice_windows=1, group_block_threads=32))
    be._groups_resident = lambda kernel, threads, smem: 1
    res = run_gpu(be, exps)
    assert be.last_timing["launch"] == "groups" and be.last_timing["blocks"] == 1
    assert all(a.same_as(b) for a, b in zip(cpu, res))


@pytest.mark.parametrize("resident", [2, "sms"])
@pytest.mark.parametrize("budget_ns", [GPU.launch_budget_ns, 20_000])
def test_groups_take_turns_on_a_small_grid(resident, budget_ns: int) -> None:
    """More groups than resident blocks (a grid of two, or of one block per SM; slices of three
    windows): the blocks take slices from the queue, each after its group's previous slice ended
    elsewhere; with short launch budgets too. The CPU's results."""
    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    be = gpu(launch="groups", defaults=replace(GPU, group_slice_windows=3, launch_budget_ns=budget_ns,
                                               group_block_threads=32))
    from mvopt.engine._gpu import experiment_groups

    blocks = be.sms if resident == "sms" else resident
    be._groups_resident = lambda kernel, threads, smem: blocks
    batch = build_batch(exps)
    offsets, _ = experiment_groups(batch.cols["exp_node_hi"] - batch.cols["exp_node_lo"], 32, GPU.group_threads_max)
    res = extract_results(batch, be.run(batch, chunk_iters=7))
    assert be.last_timing["launch"] == "groups" and be.last_timing["blocks"] == min(blocks, len(offsets) - 1)
    assert all(a.same_as(b) for a, b in zip(cpu, res))


def test_auto_runs_groups_where_experiments_fit_a_block_and_graph_beyond() -> None:
    """The default launch mode: groups for experiments of at most `auto_groups_nodes_max` nodes
    (here 36), graph for a batch with a wider one."""
    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    for bound, launch in ((128, "groups"), (32, "graph")):
        be = gpu(defaults=replace(GPU, auto_groups_nodes_max=bound))
        assert be.launch == "auto"
        res = run_gpu(be, exps)
        assert be.last_timing["launch"] == launch
        assert all(a.same_as(b) for a, b in zip(cpu, res)), launch


@pytest.mark.parametrize("launch", ["groups", "graph"])
def test_switch_event_selection_paths_match_the_cpu(launch: str) -> None:
    """The GPU's scan, tree and rescan paths (small limits put this batch's switches on all
    three, as in test_switch_windows.test_switch_event_selection_paths_agree) give the CPU's
    results."""
    exps = mixed_experiments(12)
    cpu = simulate(exps, backend="cpu")
    res = run_gpu(gpu(launch=launch, defines={"MV_CACHE_PORTS": 5, "MV_TREE_PORTS": 3}), exps)
    assert all(a.same_as(b) for a, b in zip(cpu, res))


@pytest.mark.parametrize("defines", [{"MV_LANES_PORTS_PER_ARRIVAL": 1024}, {}], ids=["every-window", "default"])
def test_wide_switches_run_port_by_port_on_the_gpu(defines: dict) -> None:
    """Rail-optimised clusters (rail switches of 16 and 32 ports, wider than the thread-local
    caches: their serial windows keep persisted caches, refilled after a window run port by port)
    in the groups mode, each port of a switch on a thread of its own (at every window with an
    arrival, and by default: light windows serial), ECMP and spraying, DCQCN: the CPU's results."""
    from mvopt.testing.scenarios import rail_allreduce

    exps = [rail_allreduce("dcqcn", "ecmp"), rail_allreduce("none", "spray"), rail_allreduce("dcqcn", "ecmp", 16)]
    cpu = simulate(exps, backend="cpu")
    assert all(a.same_as(b) for a, b in zip(cpu, run_gpu(gpu(launch="groups", defines=defines), exps)))


def test_stealing_rows_and_the_widest_first_order_match_the_cpu() -> None:
    """The graph mode's window kernel on a resident grid whose warps take rows from a counter
    (when a batch needs several waves of blocks, with the widest nodes first: forced here on a
    small batch by a resident grid of one block), and on a full grid, give the CPU's results."""
    exps = mixed_experiments(9)
    cpu = simulate(exps, backend="cpu")
    be = gpu(launch="graph")
    kernels = be.prepare(build_batch(exps))      # the ones run_gpu's batch takes
    for blocks in (1, 1000):     # a grid of one block: each warp takes many rows
        kernels.window_resident_blocks = blocks
        assert all(a.same_as(b) for a, b in zip(cpu, run_gpu(be, exps))), blocks


def test_each_rare_feature_matches_the_cpu() -> None:
    """Adaptive routing, flowlets, TIMELY and links going down, each in a batch with a plain
    experiment: the CPU's results."""
    be = gpu()
    for name, cfg in RARE_FEATURES.items():
        exps = [two_flows(name="plain"), two_flows(**cfg, name=name)]
        assert all(a.same_as(b) for a, b in zip(simulate(exps, backend="cpu"), run_gpu(be, exps))), name


def test_the_push_lock_ablation_changes_nothing_but_time() -> None:
    """MV_PUSH_LOCK (the pull-vs-lock ablation) on the GPU: the CPU's results."""
    exps = mixed_experiments(6)
    cpu = simulate(exps, backend="cpu")
    for lock in (1, 2):
        assert all(a.same_as(b) for a, b in zip(cpu, run_gpu(gpu(defines={"MV_PUSH_LOCK": lock}), exps))), lock
