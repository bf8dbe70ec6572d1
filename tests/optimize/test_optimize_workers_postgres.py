"""Several ``mvopt worker`` processes on one study through a real PostgreSQL server.

The server is started by ``.ci/services`` (tests/optimize/postgres_server.py); without it, or
without the driver, these tests are skipped with the reason.
"""

import collections
import signal
import uuid

import optuna
import pytest
from optuna.trial import TrialState

import postgres_server
from optimize_helpers import BASE
from optimize_procs import lines, start, wait_for
from mvopt.optimize import create_or_resume, load_space, make_storage
from mvopt.optimize.storage import OWNER_ATTR

URL = postgres_server.URL

pytestmark = [pytest.mark.slow, pytest.mark.skipif(postgres_server.skip_reason() is not None,
                                                  reason=str(postgres_server.skip_reason()))]


def _grid(kmins: list) -> dict:
    return {"base": BASE, "parameters": {"network.cc": ["dcqcn", "hpcc", "dctcp"], "network.lb": ["ecmp", "spray"],
                                         "network.ecn.kmin_kb": {"choices": kmins}}}


def _new_study(data: dict, gen: int) -> tuple[str, int]:
    name = f"grid-{uuid.uuid4().hex[:8]}"
    space = load_space(data)
    create_or_resume(make_storage(URL, heartbeat_s=None), space, study_name=name, sampler="grid",
                     generation_size=gen)
    return name, space.grid_size()


def _workers(name: str, env: dict, tmp_path, n: int = 3) -> list:
    procs = []
    for i in range(n):
        wenv = {**env, "MVOPT_TEST_EVAL_STARTED": str(tmp_path / f"started{i}.log")}
        procs.append(start(["worker", "--storage", URL, "--study", name, "--backend", "analytic_evaluator:make",
                            "--heartbeat", "1", "-q", "--artifacts", str(tmp_path / "art")], wenv))
    return procs


def _final_checks(name: str, n_points: int) -> list:
    study = optuna.load_study(study_name=name, storage=make_storage(URL, heartbeat_s=None))
    trials = study.get_trials()
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    points = {tuple(sorted(t.params.items())) for t in complete}
    assert len(points) == n_points  # every grid point has a complete trial
    return trials


def test_three_workers_evaluate_every_point_exactly_once(tmp_path, subprocess_env):
    name, n_points = _new_study(_grid([50.0, 100.0, 350.0]), gen=3)
    # half a second per batch: with trials created in one transaction, a worker alone could
    # otherwise finish all 6 generations before the other two have started their interpreters
    procs = _workers(name, {**subprocess_env, "MVOPT_TEST_EVAL_SLEEP": "0.5"}, tmp_path)
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    trials = _final_checks(name, n_points)
    simulated = [line.split()[1] for line in lines(subprocess_env["MVOPT_TEST_EVAL_LOG"])]
    assert len(simulated) == len(set(simulated)) == n_points  # each point simulated once, by one worker
    assert len({line.split()[0] for line in lines(subprocess_env["MVOPT_TEST_EVAL_LOG"])}) >= 2  # shared work
    assert all(t.state == TrialState.COMPLETE for t in trials)


def test_killed_worker_trials_are_retried_by_the_others(tmp_path, subprocess_env):
    name, n_points = _new_study(_grid([25.0, 50.0, 100.0, 350.0]), gen=3)
    env = {**subprocess_env, "MVOPT_TEST_EVAL_SLEEP": "3.0"}
    procs = _workers(name, env, tmp_path)
    victim = procs[0]
    try:
        wait_for(lambda: len(lines(tmp_path / "started0.log")) >= 1, 60, "worker 0's first batch", procs)
        victim.send_signal(signal.SIGKILL)  # mid-generation: its trials are RUNNING, its batch unfinished
        victim.wait()
        for p in procs[1:]:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    trials = _final_checks(name, n_points)
    victims = [t for t in trials if (t.system_attrs.get(OWNER_ATTR) or {}).get("pid") == victim.pid]
    killed = {t.number for t in victims if t.state == TrialState.FAIL}
    assert killed and {t.state for t in victims} <= {TrialState.FAIL, TrialState.COMPLETE}
    retried = {t.system_attrs.get("failed_trial") for t in trials if t.state == TrialState.COMPLETE}
    assert killed <= retried  # every trial of the killed worker was run again by the others
    log = [line.split() for line in lines(env["MVOPT_TEST_EVAL_LOG"])]
    by_survivors = collections.Counter(key for pid, key in log if int(pid) != victim.pid)
    assert set(by_survivors.values()) == {1}  # the survivors simulated each configuration once
    told_by_victim = {t.user_attrs["config_key"] for t in victims if t.state == TrialState.COMPLETE}
    assert not told_by_victim & set(by_survivors)  # nothing the victim finished was simulated again
    assert len(set(by_survivors) | told_by_victim) == n_points
