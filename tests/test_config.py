"""Experiment configuration: strict loading, clear errors, YAML round trip, generated docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mvopt.config import (ConfigError, config_key, config_to_dict, dump_config, load_config,
                          with_overrides)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("data, message", [
    ({"cluster": {"topology": "fat_tree", "k": 5}}, "cluster.k: must be an even integer >= 2, got 5"),
    ({"cluster": {"topology": "fat_tree", "k": 4, "colour": 1}}, "cluster.colour: unknown key"),
    ({"cluster": {"topology": "leaf_spine", "leaves": 4, "hosts_per_leaf": 0}},
     "cluster.hosts_per_leaf: must be > 0, got 0"),
    ({"cluster": {"topology": "fat_tree", "k": 4, "link_delay_ns": [1000, -5]}},
     "cluster.link_delay_ns: must be a non-empty list of delays >= 0, got [1000.0, -5.0]"),
    ({"cluster": {"topology": "torus", "k": 4}}, "cluster.k: is not a parameter of topology 'torus'"),
    ({"cluster": {"topology": "torus"}}, "cluster.torus_dims: is required for topology 'torus'"),
    ({"network": {"cc": "cubic"}}, "network.cc: must be one of 'none', 'dcqcn', 'hpcc', 'dctcp', 'timely', got 'cubic'"),
    ({"network": {"ecn": {"kmin_kb": 50, "kmax_kb": 10}}}, "network.ecn.kmax_kb: must be >= kmin_kb (50.0), got 10.0"),
    ({"network": {"pfc": {"enabled": "yes"}}}, "network.pfc.enabled: must be true or false, got 'yes'"),
    ({"network": {"payload_bytes": 32720}},
     "network.payload_bytes: payload + header must be at most 32767 bytes (header_bytes 48), got 32720"),
    ({"workload": {"kind": "tasks", "tasks": [{"src": 0, "dst": 1, "bytes": 10, "after": [7]}]}},
     "workload.tasks[0].after[0]: must name a task id of this list, got 7"),
    ({"workload": {"kind": "tasks", "tasks": [{"kind": "delay", "node": 0}]}},
     "workload.tasks[0].duration_ns: is required for a delay task"),
    ({"simulation": {"time_limit_ms": 0}}, "simulation.time_limit_ms: must be > 0 and at most 1e+09 ms, got 0.0"),
    ({"simulation": {"link_monitor": True}}, "simulation.link_monitor: needs simulation.queue_monitor_ns > 0"),
    ({"simulation": {"queue_monitor_ns": 0.0001}}, "simulation.queue_monitor_ns: must be 0 (off) or at least 0.001"),
    ({"simulation": {"queue_monitor_ns": -1}}, "simulation.queue_monitor_ns: must be 0 (off) or at least 0.001"),
    ({"simulation": {"queue_monitor_ns": 100, "monitor_max_samples": 0}},
     "simulation.monitor_max_samples: must be > 0, got 0"),
    ({"parallelism": {"tp": 2.5}}, "parallelism.tp: must be an integer, got 2.5"),
])
def test_invalid_input_names_the_field(data, message):
    with pytest.raises(ConfigError) as e:
        load_config(data)
    assert message in str(e.value)


def test_defaults_and_overrides():
    cfg = load_config()
    assert cfg.cluster.topology == "fat_tree" and cfg.cluster.k == 4
    assert cfg.network.cc == "dcqcn" and cfg.network.pfc.enabled
    cfg8 = load_config(None, cluster__k=8)
    assert cfg8.cluster.k == 8
    cfg2 = with_overrides(cfg, {"network.cc": "hpcc", "network.hpcc.eta": 0.9})
    assert cfg2.network.cc == "hpcc" and cfg2.network.hpcc.eta == 0.9
    with pytest.raises(ConfigError, match="network.hpcc.eta: must be between"):
        with_overrides(cfg, {"network.hpcc.eta": 7})


def test_yaml_round_trip(tmp_path):
    cfg = load_config({"cluster": {"topology": "torus", "torus_dims": [3, 4]},
                       "network": {"cc": "dctcp", "lb": "spray"}})
    path = tmp_path / "exp.yaml"
    dump_config(cfg, path)
    again = load_config(path)
    assert config_to_dict(again) == config_to_dict(cfg)
    assert config_key(again) == config_key(cfg)
    assert config_key(with_overrides(cfg, {"network.lb": "ecmp"})) != config_key(cfg)


def test_yaml_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  topology: fat_tree\n  k: [4\n")
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert str(bad) in str(e.value) and "line" in str(e.value)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("cluster:\n  topology: fat_tree\n  k: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(wrong)
    assert str(e.value) == f"{wrong}: cluster.k: must be an even integer >= 2, got 3"
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "missing.yaml")
    # a search space that cannot be read: its name once, not "file: file: ..."
    from mvopt.optimize import load_space
    with pytest.raises(ConfigError) as e:
        load_space(tmp_path / "missing.yaml")
    assert str(e.value).startswith(f"{tmp_path / 'missing.yaml'}: cannot be read")
    with pytest.raises(ConfigError) as e:              # the same file spelled another way
        load_space(f"{tmp_path}/./missing.yaml")
    assert str(e.value).count("missing.yaml") == 1


def test_foreign_and_empty_files_are_one_message(tmp_path):
    """A binary file given as an experiment or a search space, and an empty experiment file (more
    likely a mistake than a request for every default: `{}` is that): a ConfigError naming the file."""
    from mvopt.optimize import load_space

    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x7fELF" + bytes(range(200, 256)))
    for load in (load_config, load_space):
        with pytest.raises(ConfigError, match="bin.yaml: cannot be read \\(not UTF-8 text"):
            load(binary)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="empty.yaml: <root>: the file is empty"):
        load_config(empty)
    braces = tmp_path / "defaults.yaml"
    braces.write_text("{}\n")
    assert config_to_dict(load_config(braces)) == config_to_dict(load_config())


def test_configuration_reference_is_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "gen_config_docs.py"), "--check"])
    assert r.returncode == 0, "docs/configuration.md is stale: run python experiments/gen_config_docs.py"


@pytest.mark.parametrize("data, path", [
    ({"cluster": {"link_delay_ns": [1e20, 1000, 1000]}}, "cluster.link_delay_ns"),
    ({"network": {"buffer_mb": 1e12}}, "network.buffer_mb"),
    ({"cluster": {"link_gbps": [1e7, 100, 100]}}, "cluster.link_gbps"),
    ({"collective": {"bytes": 10**17}}, "collective.bytes"),
    ({"network": {"rto_us": 1e13}}, "network.rto_us"),
])
def test_a_value_the_engine_cannot_represent_is_refused_by_name(data, path) -> None:
    """Times become int64 picoseconds, sizes int64 bytes and rates int64 bits per second: a value
    past what they hold is one message naming the field and the largest value allowed."""
    with pytest.raises(ConfigError, match=rf"{path}: must be at most .* \(what the engine's 64-bit"):
        load_config(data)
