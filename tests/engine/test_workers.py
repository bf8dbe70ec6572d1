"""Backend specs: the workers they name, and when the CPU races one."""

from __future__ import annotations

import pytest

from mvopt.engine import simulate
from mvopt.engine.workers import parse_backend
from mvopt.errors import BackendUnavailable, MvoptError
from mvopt.testing.backends import available_backends
from mvopt.testing.scenarios import mixed_experiments

EXPS = mixed_experiments(9)


def test_backend_specs() -> None:
    assert [str(w) for w in parse_backend("cpu")] == ["cpu"]
    assert len(parse_backend("cpu:3")) == 3
    with pytest.raises(BackendUnavailable, match="comma-separated integers"):
        parse_backend("cpu:x")
    with pytest.raises(BackendUnavailable, match="unknown backend"):
        parse_backend("tpu")
    if "gpu" not in available_backends():
        for spec in ("gpu", "gpu:0"):
            with pytest.raises(BackendUnavailable, match="no CUDA GPU found"):
                parse_backend(spec)


def test_only_cpu_may_race_and_it_races_one_worker() -> None:
    with pytest.raises(MvoptError, match=r"only '\+cpu'.*not 'gpu'"):
        simulate(EXPS, backend="cpu+gpu")
    with pytest.raises(MvoptError, match="races one worker"):
        simulate(EXPS, backend="cpu:2+cpu")


def test_auto_races_one_gpu_with_the_cpu(monkeypatch) -> None:
    """``auto`` on a machine with one GPU: that GPU, raced by the CPU's cores; with two GPUs, both,
    not raced (the CPU races one worker); ``gpu`` alone never races; without a GPU, the CPU."""
    from mvopt.engine import _gpu, workers
    from mvopt.engine.workers import describe_backend, races

    monkeypatch.setattr(_gpu, "gpu_count", lambda: 1)
    monkeypatch.setattr(_gpu, "gpu_available", lambda: True)
    monkeypatch.setattr(workers, "usable_cores", lambda: 4)
    monkeypatch.setattr(workers, "_cpu_compiles", lambda: True)
    assert races("auto") and races("auto:0") and races("gpu:0+cpu")
    monkeypatch.setenv("MVOPT_AUTO_RACE", "0")                        # the opt-out
    assert not races("auto") and races("gpu:0+cpu")
    monkeypatch.delenv("MVOPT_AUTO_RACE")
    monkeypatch.setattr(workers, "_cpu_compiles", lambda: False)        # no C++ compiler: nothing to race with
    assert not races("auto")
    monkeypatch.setattr(workers, "_cpu_compiles", lambda: True)
    monkeypatch.setattr(workers, "usable_cores", lambda: 1)             # no spare core
    assert not races("auto")
    monkeypatch.setattr(workers, "usable_cores", lambda: 4)
    assert not races("gpu") and not races("gpu:0") and not races("cpu")
    assert describe_backend("auto") == "auto -> gpu (1 GPU: 0), raced by the CPU's cores on its slowest experiments"
    monkeypatch.setattr(_gpu, "gpu_count", lambda: 2)
    assert not races("auto") and describe_backend("auto") == "auto -> gpu (2 GPUs: 0,1)"
    monkeypatch.setattr(_gpu, "gpu_count", lambda: 0)
    monkeypatch.setattr(_gpu, "gpu_available", lambda: False)
    assert not races("auto") and describe_backend("auto") == "auto -> cpu"
