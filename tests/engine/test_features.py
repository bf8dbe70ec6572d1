"""Model features compiled per batch (engine/features.py; docs/decisions/0028): the switch a
batch gets from its experiments' features (also when one experiment among plain ones uses one),
that a build without a feature refuses a batch that uses it, and that the kernel source compiles
with every combination of switches. The GPU's builds run in test_gpu_launch.py and in the GPU
test below (skipped without a GPU)."""

from __future__ import annotations

import itertools
import subprocess
from importlib import resources

import pytest

from mvopt.build import build_experiment
from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder, build_batch
from mvopt.engine import schema
from mvopt.engine.features import FEATURES, SWITCHES, batch_features, check_features, feature_options
from mvopt.engine.source import kernel_source
from mvopt.testing.backends import available_backends

# per feature: the configuration of an experiment that uses it
CASES = {
    "adaptive": {"network": {"lb": "adaptive"}},
    "flowlet": {"network": {"lb": "adaptive", "flowlet_gap_ns": 500.0}},
    "timely": {"network": {"cc": "timely"}},
    "link_down": {"cluster": {"link_down": [[2, 0, 4000]]}},
}
SWITCH_OF = {f.name: f.macro for f in FEATURES}


def _exp(cluster: dict | None = None, network: dict | None = None, name: str = "e") -> Experiment:
    """Two flows on a k=4 fat-tree: no congestion control, ECMP, go-back-N unless told otherwise."""
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4, "gpus_per_server": 1, **(cluster or {})},
                       "network": {"cc": "none", **(network or {})}})
    g = TaskGraphBuilder()
    g.flow(0, 5, 20_000)
    g.flow(3, 12, 30_000)
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), name=name)


def _on(switches: dict[str, int]) -> set[str]:
    assert list(switches) == list(SWITCHES) and set(switches.values()) <= {0, 1}
    return {m for m, on in switches.items() if on}


def test_every_feature_has_a_case() -> None:
    assert sorted(CASES) == sorted(f.name for f in FEATURES)
    assert all(f.slot in schema.EI for f in FEATURES)


def test_a_plain_batch_gets_no_switch() -> None:
    """Also with spraying and selective repeat, which every build has."""
    plain = [_exp(), _exp(name="f"), _exp(network={"lb": "spray"}, name="s"),
             _exp(network={"transport": "sr"}, name="r")]
    assert _on(batch_features(build_batch(plain).cols)) == set()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_batch_with_a_feature_gets_its_switch_and_no_other(name: str) -> None:
    assert _on(batch_features(build_batch([_exp(**CASES[name])]).cols)) == {SWITCH_OF[name]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_mixed_batch_gets_the_feature_of_any_experiment(name: str) -> None:
    """Plain experiments before and after the one that uses the feature."""
    batch = build_batch([_exp(name="a"), _exp(**CASES[name], name="b"), _exp(name="c")])
    assert _on(batch_features(batch.cols)) == {SWITCH_OF[name]}


def test_every_feature_at_once() -> None:
    batch = build_batch([_exp(**cfg, name=k) for k, cfg in CASES.items()])
    assert _on(batch_features(batch.cols)) == set(SWITCHES)


def test_the_benchmark_gets_the_lean_build() -> None:
    """`mvopt bench` (workload (a): k=4 fat-tree ring all-reduce, ECMP, go-back-N) with each
    congestion control but TIMELY: no switch."""
    from mvopt.bench import allreduce_config
    for cc in ("none", "dcqcn", "hpcc", "dctcp"):
        batch = build_batch([build_experiment(allreduce_config(cc, 1 << 20))])
        assert _on(batch_features(batch.cols)) == set(), cc


def test_a_build_without_a_used_feature_is_refused() -> None:
    cols = build_batch([_exp(), _exp(**CASES["timely"])]).cols
    needed = batch_features(cols)
    check_features(cols, needed)
    check_features(cols, dict.fromkeys(SWITCHES, 1))
    with pytest.raises(AssertionError, match=SWITCH_OF["timely"]):
        check_features(cols, {**needed, SWITCH_OF["timely"]: 0})


def test_feature_options_name_every_switch() -> None:
    first = SWITCHES[0]
    on = {m: int(m == first) for m in SWITCHES}
    assert feature_options(on) == tuple(f"-D{m}={int(m == first)}" for m in SWITCHES)
    with pytest.raises(ValueError, match=first):
        feature_options({})
    with pytest.raises(ValueError, match="MV_FEAT_OTHER"):
        feature_options({**on, "MV_FEAT_OTHER": 0})
    with pytest.raises(ValueError, match="0 or 1"):
        feature_options({**on, first: 2})


def _kernel_files() -> dict[str, str]:
    folder = resources.files("mvopt.engine").joinpath("kernels")
    return {p.name: p.read_text() for p in folder.iterdir() if p.name.endswith((".cuh", ".cpp"))}


def test_each_feature_gates_code_as_a_constant_not_a_preprocessor_branch() -> None:
    """Every feature's predicate is used by the kernels, which name no switch (they test the
    predicates), so that no `#if` depends on one: the compiler front end sees the same code
    under every combination (only constants differ)."""
    text = "\n".join(_kernel_files().values())
    for f in FEATURES:
        assert f"uses_{f.name}(c, e)" in text, f.name
    assert "MV_FEAT_" not in text


@pytest.mark.skipif("cpu" not in available_backends(), reason="needs a C++ compiler")
def test_the_source_compiles_with_every_combination_of_switches(tmp_path) -> None:
    """The CPU's source through the host compiler's front end, once per combination (the GPU's
    builds differ from it only in the backend's own macros)."""
    from mvopt.engine.cxx import compiler
    src = tmp_path / "kernels.cpp"
    src.write_text(kernel_source("cpu"))
    for bits in itertools.product((0, 1), repeat=len(SWITCHES)):
        switches = dict(zip(SWITCHES, bits))
        r = subprocess.run([compiler(), "-std=c++17", "-fsyntax-only", *feature_options(switches), str(src)],
                           capture_output=True, text=True)
        assert r.returncode == 0, (switches, r.stderr[-2000:])


@pytest.mark.skipif("cpu" not in available_backends(), reason="needs a C++ compiler")
def test_the_kernels_without_the_features_give_the_same_results(monkeypatch) -> None:
    """The CPU's kernels compiled as the GPU's for a batch without the features (every switch 0)
    give the one build's results on such a batch: leaving the features out changes nothing."""
    from mvopt.engine import _cpu
    from mvopt.engine.batch import extract_results
    from mvopt.testing.scenarios import mixed_experiments

    exps = [e for e in mixed_experiments(9) + [_exp(network={"lb": "spray"})]
            if not any(batch_features(build_batch([e]).cols).values())]
    assert len(exps) >= 5

    def run(be):
        batch = build_batch(exps)
        return extract_results(batch, be.run(batch))

    one = _cpu.CpuBackend(threads=1)
    monkeypatch.setattr(_cpu, "FLAGS", (*_cpu.FLAGS, *feature_options(dict.fromkeys(SWITCHES, 0))))
    without = _cpu.CpuBackend(threads=1)
    assert without.lib._name != one.lib._name          # (another library)
    assert all(a.same_as(b) for a, b in zip(run(one), run(without)))


@pytest.mark.gpu
@pytest.mark.skipif("gpu" not in available_backends(), reason="needs CuPy and a GPU")
def test_the_gpu_runs_each_batch_on_the_build_of_its_features() -> None:
    """A plain batch on the build without features, a batch mixing each feature's experiment with
    a plain one on the build with (only) its switch: the CPU's results (its one build has them all)."""
    from mvopt.engine import simulate
    from mvopt.engine._gpu import GpuBackend
    from mvopt.engine.batch import extract_results

    be = GpuBackend()
    batches = [[_exp(name="a"), _exp(name="b")]]
    batches += [[_exp(name="a"), _exp(**cfg, name=k)] for k, cfg in CASES.items()]
    for exps in batches:
        batch = build_batch(exps)
        want = batch_features(batch.cols)
        res = extract_results(batch, be.run(batch))
        assert tuple(sorted(want.items())) in be.compiled
        assert all(a.same_as(b) for a, b in zip(simulate(exps, backend="cpu"), res)), [e.name for e in exps]
