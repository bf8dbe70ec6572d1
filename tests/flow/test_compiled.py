"""The compiled event loop (the CPU's) against the array path (the GPU's, here on NumPy): the same
state bit for bit, on batches whose link-sharing components merge and split at every step."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder
from mvopt.flow.batch import build_flow_batch
from mvopt.flow.compiled import run_batch_compiled
from mvopt.flow.sim import DONE, TIMEOUT, run_batch
from mvopt.testing import scenarios as sc

STATE = ("task_start_ps", "task_finish_ps", "flow_end_ps", "exp_T_ps", "exp_status", "exp_steps")


def random_traffic(seed: int, lb: str, n_flow: int = 120, time_limit_ps: int | None = None) -> Experiment:
    """`n_flow` flows of random sizes between random hosts of a k=4 fat-tree, some at once, some
    after others or after delays, some at start times of their own: links shared by changing sets."""
    from mvopt.cluster import build_topology
    rng = np.random.default_rng(seed)
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none", "lb": lb}})
    g = TaskGraphBuilder()
    ids: list[int] = []
    for i in range(n_flow):
        src, dst = rng.choice(16, 2, replace=False).tolist()
        after = rng.choice(ids, min(len(ids), int(rng.integers(0, 3))), replace=False).tolist() if ids else []
        if after and rng.random() < 0.3:
            after = [g.delay(src, int(rng.integers(0, 3_000_000)), after=after)]
        ids.append(g.flow(src, dst, int(rng.integers(1_000, 3_000_000)), after=after,
                          start_ps=int(rng.integers(0, 20_000_000)) if rng.random() < 0.5 else 0))
    extra = {} if time_limit_ps is None else {"time_limit_ps": time_limit_ps}
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), seed=seed,
                      name=f"random-{seed}-{lb}", **extra)


def assert_same_state(experiments: list[Experiment]) -> None:
    batch = build_flow_batch(experiments)
    array, compiled = run_batch(batch, np), run_batch_compiled(batch)
    for name in STATE:
        want, got = getattr(array, name), getattr(compiled, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name


def test_the_engines_mixed_experiments():
    assert_same_state(sc.mixed_experiments(9) + [sc.fat_tree_incast()])


@pytest.mark.parametrize("lb", ["ecmp", "spray"])
def test_random_traffic_whose_components_merge_and_split(lb):
    exps = [random_traffic(seed, lb) for seed in range(1, 4)]
    batch = build_flow_batch(exps)
    state = run_batch_compiled(batch)
    assert (state.exp_status == DONE).all() and (state.exp_steps > 100).all()
    assert_same_state(exps)


def test_a_timeout_beside_an_experiment_that_ends():
    late, done = random_traffic(7, "ecmp", time_limit_ps=30_000_000), random_traffic(8, "ecmp")
    state = run_batch_compiled(build_flow_batch([late, done]))
    assert state.exp_status.tolist() == [TIMEOUT, DONE]
    assert_same_state([late, done])


def test_threads_do_not_change_the_result():
    batch = build_flow_batch([random_traffic(seed, "ecmp", n_flow=40) for seed in range(1, 6)])
    one, many = run_batch_compiled(batch, threads=1), run_batch_compiled(batch, threads=4)
    for name in STATE:
        assert np.array_equal(getattr(one, name), getattr(many, name)), name
