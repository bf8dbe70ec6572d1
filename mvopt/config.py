"""Experiment configuration: strict, typed, loaded from YAML or dicts and written back to YAML.

>>> from mvopt.config import load_config
>>> cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}})
>>> cfg.cluster.k
4

Every field, its unit and default is listed in docs/configuration.md (generated from the field
declarations by ``experiments/gen_config_docs.py``). Invalid input raises :class:`ConfigError`
naming the full path of the field, e.g. ``cluster.k: must be an even integer >= 2, got 5``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from mvopt._cfg.base import Section, build, describe, field, get_path, replace_path, to_dict
from mvopt._cfg.cluster import TOPOLOGIES, ClusterConfig
from mvopt._cfg.network import DcqcnConfig, DctcpConfig, EcnConfig, HpccConfig, NetworkConfig, PfcConfig
from mvopt._cfg.simulation import SimulationConfig
from mvopt._cfg.workload import CollectiveConfig, ParallelismConfig, TaskSpec, WorkloadConfig
from mvopt.errors import ConfigError
from mvopt.files import read_text, write_text_atomic

__all__ = [
    "ExperimentConfig", "ClusterConfig", "NetworkConfig", "DcqcnConfig", "HpccConfig", "DctcpConfig",
    "EcnConfig", "PfcConfig", "WorkloadConfig", "TaskSpec", "CollectiveConfig", "ParallelismConfig",
    "SimulationConfig", "ConfigError", "TOPOLOGIES", "load_config", "load_yaml", "dump_config",
    "config_to_dict", "config_key", "describe_config", "with_overrides", "get_path",
]


@dataclass(frozen=True)
class ExperimentConfig(Section):
    """One experiment: a cluster, its network settings, a workload and how to simulate it."""

    name: str = field("experiment", doc="name shown in reports")
    cluster: ClusterConfig = field(ClusterConfig, doc="hardware and topology")
    network: NetworkConfig = field(NetworkConfig, doc="transport, congestion control, switches")
    workload: WorkloadConfig = field(WorkloadConfig, doc="what runs")
    collective: CollectiveConfig = field(CollectiveConfig, doc="collective algorithm settings")
    parallelism: ParallelismConfig = field(ParallelismConfig, doc="parallel layout (training workloads)")
    simulation: SimulationConfig = field(SimulationConfig, doc="engine settings")
    base_dir: str = field(".", doc="directory that relative file paths are resolved against "
                          "(set to the config file's directory when loaded from a file)")

    def _check(self, path: str) -> None:
        if self.cluster.topology == "fat_tree" and self.cluster.k is None:
            raise ConfigError("cluster.k", "is required for topology 'fat_tree'", show_value=False)

    def resolve_path(self, p: str) -> str:
        """A file path from the config, resolved against the config file's directory."""
        return p if os.path.isabs(p) else os.path.normpath(os.path.join(self.base_dir, p))


_DEFAULT_CLUSTER = {"topology": "fat_tree", "k": 4}


def load_yaml(path: str | os.PathLike) -> Any:
    """Parse a YAML file; syntax errors become ConfigError naming the file and line."""
    p = Path(path)
    text = read_text(p, lambda why: ConfigError(str(p), why, show_value=False))
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(where, f"invalid YAML ({problem})", show_value=False, source=str(p)) from None


def load_config(source: str | os.PathLike | Mapping[str, Any] | None = None, **overrides: Any) -> ExperimentConfig:
    """Load and validate an experiment from a YAML file, a dict, or the embedded defaults (None).

    Keyword overrides are dotted paths with ``__`` for dots: ``load_config(d, cluster__k=8)``.
    Errors raised while reading a file name that file.
    """
    src_name = None
    if source is None:
        data: Any = {}
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        src_name = str(source)
        data = load_yaml(source)
        if data is None:     # (an empty file is more likely a mistake than a request for every default)
            raise ConfigError("<root>", "the file is empty: an experiment needs at least one section "
                              "(cluster, network, workload, ...; `{}` for every default)", show_value=False,
                              source=src_name)
        if not isinstance(data, dict):
            raise ConfigError("<root>", "must be a mapping of sections", type(data).__name__, source=src_name)
        data = dict(data)
        data.setdefault("base_dir", str(Path(source).resolve().parent))
    if "cluster" not in data:
        data["cluster"] = dict(_DEFAULT_CLUSTER)
    for key, value in overrides.items():
        data = replace_path(data, key.replace("__", "."), value)
    try:
        return build(ExperimentConfig, data)
    except ConfigError as e:
        raise (e.with_source(src_name) if src_name else e) from None


def config_to_dict(cfg: ExperimentConfig, *, include_base_dir: bool = False) -> dict[str, Any]:
    """Plain-data form of a configuration (every field, defaults included)."""
    d = to_dict(cfg)
    if not include_base_dir:
        d.pop("base_dir", None)
    return d


def dump_config(cfg: ExperimentConfig, path: str | os.PathLike | None = None) -> str:
    """The configuration as YAML; written atomically to ``path`` when given."""
    text = yaml.safe_dump(config_to_dict(cfg), sort_keys=False)
    if path is not None:
        write_text_atomic(path, text)
    return text


def config_key(cfg: ExperimentConfig) -> str:
    """Canonical hash of a configuration: identical experiments share a key (simulation cache)."""
    blob = json.dumps(config_to_dict(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def with_overrides(cfg: ExperimentConfig, values: Mapping[str, Any]) -> ExperimentConfig:
    """A new validated configuration with dotted-path overrides applied."""
    data = config_to_dict(cfg, include_base_dir=True)
    for path, value in values.items():
        data = replace_path(data, path, value)
    return build(ExperimentConfig, data)


def describe_config() -> list[dict[str, str]]:
    """Every configuration field (path, type, unit, default, doc), for the reference docs."""
    return describe(ExperimentConfig)
