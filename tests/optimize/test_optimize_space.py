import collections
from pathlib import Path

import pytest

from optimize_helpers import BASE, REPO, small_space_data
from mvopt.errors import ConfigError
from mvopt.optimize.space_file import load_space

SHIPPED = sorted((REPO / "search_spaces").glob("*.yaml"))


def test_every_use_case_is_shipped():
    names = {p.stem for p in SHIPPED}
    assert {"quickstart", "topology", "collective", "parallelism", "congestion_control"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_spaces_load_and_have_feasible_points(path):
    space = load_space(path)
    assert space.name == path.stem
    cands = space.sample(100, seed=1)
    feasible = [c for c in cands if c.feasible]
    assert len(feasible) >= 50, collections.Counter(c.reason for c in cands if not c.feasible)
    assert len({c.key for c in feasible}) > 1  # the parameters do change the experiment
    assert load_space(space.to_data()).to_data() == space.to_data()  # travels inside a study


def test_quickstart_is_a_k4_fat_tree_collective():
    space = load_space(REPO / "search_spaces" / "quickstart.yaml")
    assert space.base.cluster.topology == "fat_tree" and space.base.cluster.k == 4
    assert space.base.workload.kind == "collective"
    assert {"network.cc", "network.lb", "network.ecn.kmin_kb"} <= {p.name for p in space.parameters}


def test_parallelism_space_cannot_propose_a_wrong_product():
    space = load_space(REPO / "search_spaces" / "parallelism.yaml")
    for c in space.sample(200, seed=3):
        p = c.config.parallelism
        assert p.tp * p.pp * p.cp * p.dp == c.inventory.gpus == 256


def test_topology_space_switches_topology_cleanly():
    space = load_space(REPO / "search_spaces" / "topology.yaml")
    kinds = collections.Counter(c.config.cluster.topology for c in space.sample(300, seed=2) if c.feasible)
    assert set(kinds) == {"fat_tree", "leaf_spine", "rail_optimized", "torus", "dragonfly"}
    assert space.objective_names == ["iteration_time", "cost"]


def test_condition_activates_parameter():
    space = load_space(small_space_data(parameters={
        "network.cc": ["dcqcn", "hpcc"],
        "network.hpcc.eta": {"low": 0.8, "high": 0.98, "step": 0.02, "when": {"network.cc": "hpcc"}}}))
    seen = {c.params["network.cc"]: c.params for c in space.sample(50)}
    assert "network.hpcc.eta" in seen["hpcc"] and "network.hpcc.eta" not in seen["dcqcn"]


def test_derived_and_divisor():
    space = load_space({"base": {**BASE, "cluster": {"topology": "fat_tree", "k": 4, "gpus_per_server": 8}},
                        "parameters": {"parallelism.tp": {"divisor_of": "cluster.gpus_per_server"},
                                       "parallelism.pp": {"divisor_of": "servers", "max": 4}},
                        "derived": {"parallelism.dp": "gpus // (parallelism.tp * parallelism.pp)"}})
    tp = next(p for p in space.parameters if p.name == "parallelism.tp")
    pp = next(p for p in space.parameters if p.name == "parallelism.pp")
    assert tp.choices == (1, 2, 4, 8) and pp.choices == (1, 2, 4)
    c = space.candidate({"parallelism.tp": 2, "parallelism.pp": 4})
    assert c.feasible and c.config.parallelism.dp == 16 * 8 // 8


def test_constraint_makes_candidate_infeasible_without_raising():
    space = load_space(small_space_data(constraints=["network.ecn.kmin_kb <= 200"]))
    c = space.candidate({"network.cc": "dcqcn", "network.lb": "ecmp", "network.ecn.kmin_kb": 300.0})
    assert c.config is not None and not c.feasible and c.violation == pytest.approx(0.5)
    assert "kmin_kb <= 200" in c.reason


def test_invalid_value_combination_is_an_infeasible_candidate():
    space = load_space(small_space_data(parameters={"network.ecn.kmin_kb": {"low": 10.0, "high": 400.0},
                                                    "network.ecn.kmax_kb": {"low": 10.0, "high": 400.0}}))
    c = space.candidate({"network.ecn.kmin_kb": 300.0, "network.ecn.kmax_kb": 20.0})
    assert c.config is None and not c.feasible and "kmax_kb" in c.reason


def test_grid_lists_every_parameter():
    space = load_space(small_space_data(parameters={"network.cc": ["dcqcn", "hpcc"],
                                                    "collective.channels": {"low": 1, "high": 4},
                                                    "network.hpcc.eta": {"low": 0.9, "high": 0.98, "step": 0.04}}))
    assert space.grid() == {"network.cc": ["dcqcn", "hpcc"], "collective.channels": [1, 2, 3, 4],
                            "network.hpcc.eta": [0.9, 0.94, 0.98]}
    assert space.grid_size() == 24


def _error(data, tmp_path: Path | None = None) -> ConfigError:
    src = data
    if tmp_path is not None:
        import yaml
        src = tmp_path / "bad.yaml"
        src.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_space(src)
    return info.value


def test_unknown_parameter_path_names_file_field_and_suggestion(tmp_path):
    e = _error(small_space_data(parameters={"network.ccc": ["dcqcn"]}), tmp_path)
    assert e.source.endswith("bad.yaml") and e.path == "parameters.network.ccc"
    assert "did you mean 'network.cc'" in str(e)


def test_empty_range():
    e = _error(small_space_data(parameters={"network.ecn.kmin_kb": {"low": 50.0, "high": 10.0}}))
    assert "empty range" in str(e) and e.path == "parameters.network.ecn.kmin_kb"
    assert "empty range" in str(_error(small_space_data(parameters={"parallelism.tp": {"divisor_of": 8, "min": 16}})))
    assert "non-empty list" in str(_error(small_space_data(parameters={"network.cc": []})))


def test_value_not_allowed_by_the_field():
    e = _error(small_space_data(parameters={"network.cc": ["dcqcn", "bbr"]}))
    assert "network.cc" in str(e) and "'bbr'" in str(e) and "dcqcn" in str(e)
    e = _error(small_space_data(parameters={"network.hpcc.eta": {"low": 0.5, "high": 1.5}}))
    assert "between 0.01 and 1.0" in str(e)


def test_condition_on_unknown_parameter():
    e = _error(small_space_data(parameters={"network.cc": ["dcqcn"],
                                            "network.hpcc.eta": {"low": 0.8, "high": 0.9, "when": {"network.lb": "spray"}}}))
    assert e.path == "parameters.network.hpcc.eta.when" and "network.lb" in str(e)


def test_condition_on_a_value_its_parameter_never_takes():
    """A `when` naming a value the other parameter never takes (a typo) would leave the parameter
    silently unsampled there: an error naming both."""
    e = _error(small_space_data(parameters={"network.cc": ["dcqcn", "hpcc"],
                                            "network.hpcc.eta": {"low": 0.8, "high": 0.9, "when": {"network.cc": "hpcx"}}}))
    assert e.path == "parameters.network.hpcc.eta.when.network.cc" and e.value == "hpcx"
    assert "one of 'dcqcn', 'hpcc'" in str(e)
    e = _error(small_space_data(parameters={"network.cc": ["dcqcn", "hpcc"], "parallelism.tp": {"low": 1, "high": 8, "step": 2},
                                            "network.hpcc.eta": {"low": 0.8, "high": 0.9, "when": {"parallelism.tp": [3, 4]}}}))
    assert e.value == 4 and "integers 1 to 8 in steps of 2" in str(e)
    ok = small_space_data(parameters={"network.cc": ["dcqcn", "hpcc"], "parallelism.tp": {"low": 1, "high": 8, "step": 2},
                                      "network.hpcc.eta": {"low": 0.8, "high": 0.9, "when": {"parallelism.tp": 3.0}}})
    assert load_space(ok).parameters          # (3.0 == 3: a value tp takes)


def test_every_point_infeasible():
    e = _error(small_space_data(constraints=["network.ecn.kmin_kb > 1000"]))
    assert "every one of" in str(e) and "infeasible" in str(e)


@pytest.mark.parametrize("data, fragment", [
    ({"base": BASE, "parameters": {"network.cc": ["dcqcn"]}, "objective": ["x"]}, "unknown key"),
    ({"parameters": {"network.cc": ["dcqcn"]}}, "base: is required"),
    ({"base": BASE, "parameters": {}}, "non-empty mapping"),
    ({"base": {**BASE, "cluster": {"topology": "fat_tree", "k": 5}}, "parameters": {"network.cc": ["dcqcn"]}}, "base.cluster.k"),
    ({"base": BASE, "parameters": {"network.cc": ["dcqcn"]}, "derived": {"network.nope": "1"}}, "derived.network.nope"),
    ({"base": BASE, "parameters": {"network.cc": ["dcqcn"]}, "constraints": ["gpu_count > 1"]}, "gpu_count"),
    ({"base": BASE, "parameters": {"unused_var": [1, 2]}}, "no derived value"),
    ({"base": BASE, "parameters": {"network.cc": ["dcqcn"]}, "objectives": ["cost"]}, "prices"),
    ({"base": BASE, "parameters": {"network.cc": ["dcqcn"]}, "run": {"generation_size": 0}}, "run.generation_size"),
    ({"base": BASE, "parameters": {"network.cc": ["dcqcn"]}, "run": {"sampler": "tpee"}},
     "run.sampler: must be a sampler's name (tpe,"),
    ({"base": BASE, "parameters": {"network.ecn.kmin_kb": {"low": 0.0, "high": 1.0, "log": True}}}, "> 0 with log"),
    ({"base": BASE, "parameters": {"a": {"low": 1, "high": 2, "when": "b > 1"}, "b": {"low": 1, "high": 2, "when": "a > 1"}},
      "constraints": ["a + b > 0"]}, "cycle"),
])
def test_bad_spaces(data, fragment):
    assert fragment in str(_error(data))


def test_bad_yaml_file_names_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("base: {cluster: {k: 4}\nparameters: [\n")
    with pytest.raises(ConfigError, match="broken.yaml: line"):
        load_space(p)


def test_base_from_a_file(tmp_path):
    (tmp_path / "exp.yaml").write_text("cluster: {topology: fat_tree, k: 4}\n")
    (tmp_path / "space.yaml").write_text("base: exp.yaml\nparameters: {network.lb: [ecmp, spray]}\n")
    space = load_space(tmp_path / "space.yaml")
    assert space.name == "space" and space.base.cluster.k == 4


def test_a_derived_value_that_would_never_return_is_refused_at_load():
    with pytest.raises(ConfigError, match=r"'9\*\*9\*\*9': beyond what an expression may compute.*256"):
        load_space(small_space_data(derived={"collective.bytes": "9**9**9"}))
