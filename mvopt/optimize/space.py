"""Search spaces: a base experiment, the parameters to search, and how a point becomes an experiment.

:class:`SearchSpace` proposes parameter values through any Optuna-like trial
(:meth:`SearchSpace.suggest`) and maps them to a validated experiment with the derived values
and constraints applied (:meth:`SearchSpace.candidate`), never raising for a bad point. The file
format and its validation live in :mod:`mvopt.optimize.space_file` (``load_space``).
"""

from __future__ import annotations

import collections
import collections.abc
import copy
import dataclasses
import functools
import itertools
import random
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from mvopt._cfg.cluster import TOPOLOGY_FIELDS
from mvopt.config import ClusterConfig, ExperimentConfig, config_key, config_to_dict, with_overrides
from mvopt.errors import ConfigError
from mvopt.optimize.cost import PriceTable
from mvopt.optimize.expr import Expr, ExprError
from mvopt.optimize.fidelity import DEFAULT_PROMOTE, FIDELITIES, MAX_REPLICATES, FidelityPlan
from mvopt.optimize.inventory import Inventory, inventory
from mvopt.optimize.params import Condition, Parameter, TrialLike
from mvopt.optimize.scenarios import Scenario, scenario_configs

__all__ = ["SearchSpace", "Candidate", "Objective", "RunDefaults", "Derived", "Constraint", "OBJECTIVES", "TIME_OBJECTIVES",
           "RandomTrial", "flatten"]

# iteration_time: seconds (over scenarios, their mean or worst as the space says); worst_iteration_time:
# the slowest scenario's seconds (a space with scenarios); cost: the price table's
OBJECTIVES = ("iteration_time", "worst_iteration_time", "cost")
TIME_OBJECTIVES = ("iteration_time", "worst_iteration_time")  # in seconds
_SAMPLES_FOR_CHECK = 256
_CANDIDATE_CACHE = 4096  # distinct points whose candidate SearchSpace.candidate remembers


@dataclass(frozen=True)
class Objective:
    """One objective, always minimised: ``iteration_time`` (seconds; over scenarios, their mean or
    worst), ``worst_iteration_time`` (the slowest scenario's seconds) or ``cost`` (price table)."""

    name: str
    direction: str = "minimize"


@dataclass(frozen=True)
class RunDefaults:
    """Defaults of the ``run:`` section (command-line options override them).

    ``fidelity``: ``packet``, ``flow`` or ``multi`` (None: the base experiment's
    ``simulation.fidelity``); ``promote``: the share of a generation's trials that ``multi``
    simulates at packet level too; ``replicates``: seeds per simulation of the deciding level
    (:mod:`mvopt.optimize.fidelity`)."""

    sampler: str = "tpe"
    generation_size: int = 32
    n_trials: int | None = None
    timeout_s: float | None = None
    seed: int | None = None
    fidelity: str | None = None
    promote: float = DEFAULT_PROMOTE
    replicates: int = 1

    @classmethod
    def parse(cls, raw: Any) -> "RunDefaults":
        """Validate a ``run:`` mapping."""
        if raw is None:
            return cls()
        kinds = {"sampler": str, "generation_size": int, "n_trials": int, "timeout_s": (int, float), "seed": int,
                 "fidelity": str, "promote": (int, float), "replicates": int}
        if not isinstance(raw, Mapping):
            raise ConfigError("run", f"must be a mapping ({', '.join(kinds)})", raw)
        for key, value in raw.items():
            if key not in kinds:
                raise ConfigError(f"run.{key}", f"unknown key (known keys: {', '.join(kinds)})", show_value=False)
            if key == "fidelity":
                if value not in FIDELITIES:
                    raise ConfigError("run.fidelity", f"must be one of {', '.join(FIDELITIES)}", value)
            elif isinstance(value, bool) or not isinstance(value, kinds[key]) or \
                    (key in ("generation_size", "n_trials", "timeout_s", "promote") and value <= 0):
                raise ConfigError(f"run.{key}", "must be a positive number" if key != "sampler" else "must be a string", value)
        if raw.get("promote", DEFAULT_PROMOTE) > 1:
            raise ConfigError("run.promote", "must be a share of the generation, above 0 and at most 1", raw["promote"])
        if not 1 <= raw.get("replicates", 1) <= MAX_REPLICATES:
            raise ConfigError("run.replicates", f"must be from 1 to {MAX_REPLICATES}", raw["replicates"])
        return cls(**dict(raw))

    @property
    def fidelity_of_base(self) -> str | None:
        """The ``simulation.fidelity`` this section sets on the base experiment (None: none;
        ``multi`` decides at packet level)."""
        return None if self.fidelity is None else ("flow" if self.fidelity == "flow" else "packet")


@dataclass(frozen=True)
class Derived:
    """A config value computed from the parameters (``when`` limits where it applies)."""

    path: str
    expr: Expr
    when: Condition | None = None


@dataclass(frozen=True)
class Constraint:
    """A condition every candidate must meet; violated ones are infeasible (no simulation)."""

    expr: Expr


@dataclass
class Candidate:
    """One point of the space, mapped to an experiment (or to the reason it cannot be one)."""

    params: dict[str, Any]
    config: ExperimentConfig | None
    reason: str | None = None
    violation: float = 0.0
    cost: float | None = None
    inventory: Inventory | None = None
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)  # config paths set: parameters, derived values
    scenario_configs: tuple[ExperimentConfig, ...] = ()  # ``config`` under each scenario of the space (none: none)

    @property
    def feasible(self) -> bool:
        """True when the configuration is valid and meets every constraint of the space."""
        return self.config is not None and self.violation <= 0.0

    @functools.cached_property
    def key(self) -> str | None:
        """Canonical hash of the configuration (the simulation cache key)."""
        return None if self.config is None else config_key(self.config)

    @functools.cached_property
    def config_data(self) -> dict[str, Any] | None:
        """``config_to_dict(config)`` (computed once; treat as read-only)."""
        return None if self.config is None else config_to_dict(self.config)


class RandomTrial:
    """A stand-in for an Optuna trial that samples uniformly (used to check a space)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int:
        return low + step * self.rng.randint(0, (high - low) // step)

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float:
        if step:
            return round(low + step * self.rng.randint(0, int((high - low) / step + 1e-9)), 12)
        return self.rng.uniform(low, high)

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self.rng.choice(list(choices))


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{key}."))
        else:
            out[key] = v
    return out


@dataclass
class SearchSpace:
    """A validated search space; see the module docstring for the file format."""

    name: str
    source: str
    base: ExperimentConfig
    parameters: tuple[Parameter, ...]
    derived: tuple[Derived, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    objectives: tuple[Objective, ...] = (Objective("iteration_time"),)
    prices: PriceTable | None = None
    description: str = ""
    run: RunDefaults = RunDefaults()
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    scenarios: tuple[Scenario, ...] = ()   # every trial is simulated once per scenario (mvopt.optimize.scenarios)
    scenario_objective: str = "mean"       # iteration_time over the scenarios: their mean or worst

    def to_data(self) -> dict[str, Any]:
        """A self-contained mapping (base experiment inlined) that :func:`load_space` accepts."""
        return copy.deepcopy(self.data)

    @functools.cached_property
    def _base_env(self) -> dict[str, Any]:
        return flatten(config_to_dict(self.base))

    @property
    def directions(self) -> list[str]:
        """Optuna study directions, one per objective."""
        return [o.direction for o in self.objectives]

    @property
    def objective_names(self) -> list[str]:
        return [o.name for o in self.objectives]

    @property
    def fidelity_plan(self) -> FidelityPlan:
        """How trials are simulated: ``run.fidelity`` (else the base's level), promotion, replicates."""
        return FidelityPlan(self.run.fidelity or self.base.simulation.fidelity, float(self.run.promote),
                            self.run.replicates)

    def suggest(self, trial: TrialLike) -> dict[str, Any]:
        """Ask ``trial`` for every active parameter (in dependency order); returns the params."""
        base_env = self._base_env
        params: dict[str, Any] = {}
        for p in self.parameters:
            if p.when is None or p.when.holds({**base_env, **params}):
                params[p.name] = p.suggest(trial)
        return params

    def candidate(self, params: Mapping[str, Any]) -> Candidate:
        """Map parameter values to an experiment: apply them, the derived values, the constraints.

        Never raises for a bad point: an invalid configuration or a violated constraint gives an
        infeasible candidate whose ``reason`` says why. The mapping is deterministic, so the last
        :data:`_CANDIDATE_CACHE` distinct points are remembered (samplers repeat points often);
        a returned candidate is shared: treat it as read-only.
        """
        try:
            memo_key: tuple | None = tuple(sorted((k, type(v).__name__, v) for k, v in params.items()))
            hash(memo_key)
        except TypeError:
            memo_key = None
        memo = self.__dict__.setdefault("_candidates", {})
        if memo_key is not None and memo_key in memo:
            return memo[memo_key]
        cand = self._candidate(params)
        if memo_key is not None:
            if len(memo) >= _CANDIDATE_CACHE:
                memo.pop(next(iter(memo)))
            memo[memo_key] = cand
        return cand

    def _candidate(self, params: Mapping[str, Any]) -> Candidate:
        params = dict(params)
        variables = {k: v for k, v in params.items() if "." not in k}
        overrides = {k: v for k, v in params.items() if "." in k}
        try:
            if self.derived:
                env = _DerivedEnv(self, overrides, variables)
                for d in self.derived:
                    if d.when is None or d.when.holds(env):
                        overrides[d.path] = d.expr.evaluate(env)
            cfg = _apply(self.base, overrides)
            inv = inventory(cfg)
            under = tuple(scenario_configs(cfg, self.scenarios))
        except ConfigError as e:
            return Candidate(params, None, reason=f"invalid configuration: {e}", violation=1.0)
        except ExprError as e:
            return Candidate(params, None, reason=f"derived value: {e}", violation=1.0)
        cost = self.prices.cost(inv) if self.prices is not None else None
        env = {**_env(cfg, variables, inv), "cost": cost}
        total, failed = 0.0, []
        for c in self.constraints:
            try:
                v = c.expr.violation(env)
            except ExprError as e:
                v, failed = 1.0, failed + [str(e)]
            if v > 0:
                total += v
                failed.append(c.expr.source)
        reason = f"constraint violated: {'; '.join(failed)}" if failed else None
        return Candidate(params, cfg, reason=reason, violation=total, cost=cost, inventory=inv, overrides=overrides,
                         scenario_configs=under)

    def grid(self) -> dict[str, list[Any]]:
        """Every parameter's grid (for the grid sampler); inactive values are deduplicated later."""
        return {p.name: p.grid() for p in self.parameters}

    def grid_size(self) -> int:
        """Number of points of :meth:`grid` (before removing duplicate configurations)."""
        n = 1
        for p in self.parameters:
            n *= p.grid_size()
        return n

    def sample(self, n: int, seed: int = 0) -> list[Candidate]:
        """``n`` uniformly random candidates (no Optuna, no simulation)."""
        rng = random.Random(seed)
        return [self.candidate(self.suggest(RandomTrial(rng))) for _ in range(n)]

    def check_some_feasible(self, n: int = _SAMPLES_FOR_CHECK, seed: int = 0) -> None:
        """Raise ConfigError when none of ``n`` sampled points (or of the grid, when smaller) is feasible."""
        try:
            small = self.grid_size() <= n
        except ConfigError:
            small = False
        if small:
            grid = self.grid()
            cands = [self.candidate(self._active(dict(zip(grid, values))))
                     for values in itertools.product(*grid.values())]
        else:
            cands = self.sample(n, seed)
        if any(c.feasible for c in cands):
            return
        reasons = collections.Counter(c.reason for c in cands)
        reason, count = reasons.most_common(1)[0]
        raise ConfigError("<search space>", f"every one of {len(cands)} sampled points is infeasible "
                          f"({count} of them: {reason})", show_value=False, source=self.source)

    def _active(self, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters of ``params`` whose condition holds (a grid point lists them all)."""
        env = self._base_env
        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.name in params and (p.when is None or p.when.holds({**env, **out})):
                out[p.name] = params[p.name]
        return out

    def active_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Drop the values of parameters whose condition does not hold."""
        return self._active(dict(params))


# ------------------------------------------------------------------------------------------
# applying values to configurations

_TOPO_SPECIFIC = sorted({f for fs in TOPOLOGY_FIELDS.values() for f in fs})


def _cluster_defaults() -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(ClusterConfig) if f.name in _TOPO_SPECIFIC}


def _apply(cfg: ExperimentConfig, values: Mapping[str, Any]) -> ExperimentConfig:
    """``with_overrides``, where a new ``cluster.topology`` first resets the other topologies' fields."""
    if not values:
        return cfg
    values = dict(values)
    topo = values.get("cluster.topology")
    if topo is not None and topo != cfg.cluster.topology and topo in TOPOLOGY_FIELDS:
        for name, default in _cluster_defaults().items():
            if name not in TOPOLOGY_FIELDS[topo]:
                values.setdefault(f"cluster.{name}", default)
    return with_overrides(cfg, values)


_INVENTORY_NAMES = frozenset(("servers", "gpus", "hosts", "nics", "switches", "links", "switch_ports"))


class _DerivedEnv(collections.abc.Mapping):
    """Names seen by derived expressions: the base experiment overlaid with the parameters and
    the derived values so far; inventory names (``gpus``...) build the cluster as it stands."""

    def __init__(self, space: "SearchSpace", overrides: dict[str, Any], variables: Mapping[str, Any]) -> None:
        self.space, self.overrides, self.variables = space, overrides, variables

    def __getitem__(self, name: str) -> Any:
        if name in self.variables:
            return self.variables[name]
        if name in self.overrides:
            return self.overrides[name]
        if name in _INVENTORY_NAMES:
            return inventory(_apply(self.space.base, self.overrides)).names()[name]
        return self.space._base_env[name]

    def __contains__(self, name: object) -> bool:
        return name in self.variables or name in self.overrides or name in _INVENTORY_NAMES \
            or name in self.space._base_env

    def __iter__(self) -> Any:
        return iter({**self.space._base_env, **self.overrides, **self.variables})

    def __len__(self) -> int:
        return len({**self.space._base_env, **self.overrides, **self.variables})


def _env(cfg: ExperimentConfig, variables: Mapping[str, Any], inv: Inventory | None = None) -> dict[str, Any]:
    inv = inventory(cfg) if inv is None else inv
    return {**flatten(config_to_dict(cfg)), **inv.names(), **variables}
