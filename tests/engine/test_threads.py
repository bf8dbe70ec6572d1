"""Per-experiment work in threads: only large experiments get several."""

from __future__ import annotations




def test_experiment_threads_keeps_small_experiments_on_one_thread() -> None:
    """Work per experiment runs in threads only for large experiments (on average), where NumPy
    releases the interpreter lock for most of it; small ones stay on one thread."""
    from types import SimpleNamespace

    from mvopt.engine.threads import experiment_threads, EXPERIMENT_THREADS_MIN_TASKS, THREAD_MAP_LIMIT

    def exps(*tasks: int) -> list:
        return [SimpleNamespace(tasks=SimpleNamespace(n=t)) for t in tasks]

    assert experiment_threads([]) == 1
    assert experiment_threads(exps(480, 480)) == 1
    assert experiment_threads(exps(EXPERIMENT_THREADS_MIN_TASKS)) == THREAD_MAP_LIMIT
    assert experiment_threads(exps(2 * EXPERIMENT_THREADS_MIN_TASKS, 10)) == THREAD_MAP_LIMIT
    assert experiment_threads(exps(EXPERIMENT_THREADS_MIN_TASKS - 1, 10)) == 1
