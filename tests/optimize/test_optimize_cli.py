"""The optimize / worker / report commands, as subprocesses and in-process."""

import sys

import optuna
import pytest
import yaml

from optimize_helpers import REPO, small_space_data
from optimize_procs import run


def test_check_shipped_space(subprocess_env):
    res = run(["optimize", str(REPO / "search_spaces" / "quickstart.yaml"), "--check"], subprocess_env)
    assert res.returncode == 0 and "quickstart" in res.stdout and ": ok" in res.stdout


def test_bad_space_is_one_line_error(tmp_path, subprocess_env):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(small_space_data(parameters={"network.ecn.kmin": {"low": 1.0, "high": 2.0}})))
    res = run(["optimize", str(bad), "--storage", f"sqlite:///{tmp_path / 'x.db'}"], subprocess_env)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "bad.yaml" in res.stderr and "network.ecn.kmin_kb" in res.stderr
    assert not (tmp_path / "x.db").exists()  # nothing created before the space validated


def test_a_backend_this_machine_lacks_fails_before_the_study_exists(tmp_path, subprocess_env):
    from mvopt.testing.backends import available_backends
    if "gpu" in available_backends():
        pytest.skip("this machine has a GPU")
    db = tmp_path / "g.db"
    res = run(["optimize", str(REPO / "search_spaces" / "quickstart.yaml"), "--storage", f"sqlite:///{db}",
               "--backend", "gpu", "-n", "2"], subprocess_env)
    assert res.returncode == 1 and "Traceback" not in res.stderr and "no CUDA GPU found" in res.stderr
    assert not db.exists()


def test_report_of_a_missing_storage_creates_nothing(tmp_path, subprocess_env):
    for url in (f"sqlite:///{tmp_path / 'nope.db'}", str(tmp_path / "nope.log")):
        res = run(["report", "--storage", url, "--out", str(tmp_path / "rep")], subprocess_env)
        assert res.returncode == 1 and "Traceback" not in res.stderr and "does not exist" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    from mvopt.optimize.storage import make_storage       # a URL's query is not part of the file name
    db = tmp_path / "there.db"
    make_storage(f"sqlite:///{db}", heartbeat_s=None)
    make_storage(f"sqlite:///{db}?timeout=30", heartbeat_s=None, must_exist=True)


def test_optimize_then_report(tmp_path, subprocess_env):
    space = tmp_path / "s.yaml"
    space.write_text(yaml.safe_dump(small_space_data(name="cli", run={"generation_size": 4, "n_trials": 12})))
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    res = run(["optimize", str(space), "--storage", db, "--backend", "analytic_evaluator:make", "--seed", "2"],
              subprocess_env)
    assert res.returncode == 0, res.stderr
    assert "study 'cli' (new) in" in res.stderr
    assert "gen   2 [####################] 12/12 trials | best" in res.stderr  # progress line per generation
    assert res.stderr.count("also compiles the simulator") == 1    # said before the first batch only
    assert "12 trials in 3 generations" in res.stdout and "network.cc=" in res.stdout  # final table
    again = run(["optimize", str(space), "--storage", db, "--backend", "analytic_evaluator:make"], subprocess_env)
    assert again.returncode == 1 and "--resume" in again.stderr
    more = run(["optimize", str(space), "--storage", db, "--backend", "analytic_evaluator:make", "--resume", "-n", "4"],
               subprocess_env)
    assert more.returncode == 0 and "study 'cli' (resumed with 12 trials) in" in more.stderr, more.stderr
    assert "4 trials in 1 generation (" in more.stdout
    rep = run(["report", "--storage", db, "--out", str(tmp_path / "rep")], subprocess_env)
    assert rep.returncode == 0, rep.stderr
    assert (tmp_path / "rep" / "index.html").exists()
    study = optuna.load_study(study_name="cli", storage=db)
    assert len(study.trials) == 16


def test_failing_simulator_is_a_clear_error(tmp_path, monkeypatch, capsys):
    """With the default backend and a simulator that fails, the run stops with one line, no trial left RUNNING."""
    import mvopt.build
    import optimize_cli_runner
    from mvopt.errors import BackendUnavailable

    def fail(*a, **kw):
        raise BackendUnavailable("the simulator's backend went away")
    monkeypatch.setattr(mvopt.build, "evaluate", fail)
    space = tmp_path / "s.yaml"
    space.write_text(yaml.safe_dump(small_space_data(name="nosim")))
    db = f"sqlite:///{tmp_path / 'n.db'}"
    assert optimize_cli_runner.main(["optimize", str(space), "--storage", db, "-n", "4", "-g", "4", "-q"]) == 1
    err = capsys.readouterr().err
    assert "the simulator's backend went away" in err and "Traceback" not in err
    states = {t.state for t in optuna.load_study(study_name="nosim", storage=db).trials}
    assert optuna.trial.TrialState.RUNNING not in states


@pytest.mark.slow
def test_quickstart_with_the_simulator(tmp_path, subprocess_env):
    """The README's first command at toy size, on the real CPU simulator."""
    db = f"sqlite:///{tmp_path / 'q.db'}"
    res = run(["optimize", str(REPO / "search_spaces" / "quickstart.yaml"), "--storage", db, "-n", "8", "-g", "8"],
              subprocess_env, timeout=600)
    if res.returncode != 0 and "backend" in res.stderr.lower() and "unavailable" in res.stderr.lower():
        pytest.skip(res.stderr.strip())
    assert res.returncode == 0, res.stderr
    study = optuna.load_study(study_name="quickstart", storage=db)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 8 and all(t.user_attrs["backend"] == "cpu" for t in done)
    assert any(t.user_attrs["feasible"] and t.values[0] > 0 for t in done)


def test_worker_needs_an_existing_study(tmp_path, subprocess_env):
    res = run(["worker", "--storage", f"sqlite:///{tmp_path / 'w.db'}", "--study", "nope"], subprocess_env)
    assert res.returncode == 1 and "no study named 'nope'" in res.stderr


def test_optimizer_imports_neither_engine_nor_cupy():
    import subprocess
    code = ("import sys, mvopt.optimize, mvopt.commands.optimize, mvopt.commands.worker, mvopt.commands.report; "
            "bad = [m for m in sys.modules if m.startswith(('mvopt.engine', 'cupy', 'mvopt.build'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_sampler_used_must_suit_the_objectives(tmp_path, capsys):
    """A space whose run.sampler handles one objective, with two: an error naming the file's field,
    before any storage is made; --sampler overrides it with a sampler that suits them."""
    import optimize_cli_runner
    space = tmp_path / "s.yaml"
    space.write_text(yaml.safe_dump(small_space_data(name="two", prices={"switch": 1}, objectives=["iteration_time", "cost"],
                                                     run={"sampler": "cmaes"})))
    assert optimize_cli_runner.main(["optimize", str(space), "--check"]) == 1
    err = capsys.readouterr().err
    assert "s.yaml: run.sampler: sampler 'cmaes' handles one objective only" in err
    assert optimize_cli_runner.main(["optimize", str(space), "--check", "--sampler", "nsga2"]) == 0
    assert optimize_cli_runner.main(["optimize", str(space), "--check", "--sampler", "cmaes"]) == 1
    assert "--sampler: sampler 'cmaes' handles one objective only" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


@pytest.mark.parametrize("command, args, option", [
    ("optimize", ["-n", "0"], "-n/--n-trials: must be >= 1, got 0"),
    ("optimize", ["-n", "-5"], "-n/--n-trials: must be >= 1, got -5"),
    ("optimize", ["-g", "-3"], "-g/--generation-size: must be >= 1, got -3"),
    ("optimize", ["-g", "0"], "-g/--generation-size: must be >= 1, got 0"),
    ("optimize", ["--timeout", "0"], "--timeout: a duration must be positive"),
    ("optimize", ["--timeout=-1h"], "--timeout: a duration must be positive"),
    ("optimize", ["--seed", "-1"], "--seed: must be from 0 to 4294967295, got -1"),
    ("optimize", ["--top", "0"], "--top: must be >= 1, got 0"),
    ("optimize", ["--heartbeat", "-1"], "--heartbeat: must be >= 0, got -1"),
    ("worker", ["--study", "small", "--study-trials", "0"], "--study-trials: must be >= 1, got 0"),
    ("worker", ["--study", "small", "-n", "x"], "-n/--n-trials: not an integer: 'x'"),
    ("report", ["--out", "rep", "--top", "-2"], "--top: must be >= 1, got -2"),
])
def test_every_argument_is_checked_before_the_storage_is_touched(tmp_path, capsys, monkeypatch, command, args, option):
    import optimize_cli_runner
    monkeypatch.chdir(tmp_path)
    space = tmp_path / "s.yaml"
    space.write_text(yaml.safe_dump(small_space_data()))
    db = f"sqlite:///{tmp_path / 'a.db'}"
    head = [command, str(space)] if command == "optimize" else [command]
    with pytest.raises(SystemExit) as e:
        optimize_cli_runner.main(head + ["--storage", db] + args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and option in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]   # no database, no report folder
