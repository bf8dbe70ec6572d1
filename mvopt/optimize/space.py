"""Search spaces: a base experiment plus the parameters to search (YAML in ``search_spaces/``).

A search space file (full schema in docs/optimizer.md)::

    name: quickstart                      # study name (default: the file name)
    base: ../experiments/x.yaml           # or an inline experiment mapping
    parameters:                           # dotted config paths (or free variables, no dot)
      network.cc: [dcqcn, hpcc, dctcp]
      network.ecn.kmin_kb: {low: 10.0, high: 400.0, log: true}
      network.hpcc.eta: {low: 0.80, high: 0.98, step: 0.02, when: {network.cc: hpcc}}
      parallelism.tp: {divisor_of: cluster.gpus_per_server}
    derived:                              # computed from the parameters, cannot be proposed wrong
      parallelism.dp: "gpus // (parallelism.tp * parallelism.pp)"
    constraints: ["network.ecn.kmin_kb <= network.ecn.kmax_kb"]
    prices: {switch: 20000, switch_port: 400, link: 250, nic: 1200}
    objectives: [iteration_time, cost]

:func:`load_space` validates everything before any simulation: parameter paths against the
configuration schema, every range and choice against the field's type and checks, every name
an expression uses, conditions only on parameters of the space, and (by sampling the space a
bounded number of times, without simulation) that at least one point is valid.
"""

from __future__ import annotations

import collections
import collections.abc
import copy
import dataclasses
import difflib
import functools
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, get_type_hints

from mvopt._cfg.base import _coerce  # field-level type coercion, without cross-field checks
from mvopt._cfg.cluster import TOPOLOGY_FIELDS
from mvopt.config import ExperimentConfig, config_key, config_to_dict, describe_config, load_config, load_yaml, with_overrides
from mvopt.errors import ConfigError
from mvopt.optimize.cost import PriceTable
from mvopt.optimize.expr import Expr, ExprError
from mvopt.optimize.inventory import Inventory, inventory
from mvopt.optimize.params import CategoricalParam, Condition, Parameter, TrialLike, parse_condition, parse_parameter

__all__ = ["SearchSpace", "Candidate", "Objective", "RunDefaults", "load_space", "OBJECTIVES", "RandomTrial", "flatten"]

OBJECTIVES = ("iteration_time", "cost")
_TOP_KEYS = ("name", "description", "base", "parameters", "derived", "constraints", "prices", "objectives", "run")
_SAMPLES_FOR_CHECK = 256


@dataclass(frozen=True)
class Objective:
    """One objective, always minimised: ``iteration_time`` (seconds) or ``cost`` (price table)."""

    name: str
    direction: str = "minimize"


@dataclass(frozen=True)
class RunDefaults:
    """Defaults of the ``run:`` section (command-line options override them)."""

    sampler: str = "tpe"
    generation_size: int = 32
    n_trials: int | None = None
    timeout_s: float | None = None
    seed: int | None = None

    @classmethod
    def parse(cls, raw: Any) -> "RunDefaults":
        """Validate a ``run:`` mapping."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigError("run", "must be a mapping (sampler, generation_size, n_trials, timeout_s, seed)", raw)
        kinds = {"sampler": str, "generation_size": int, "n_trials": int, "timeout_s": (int, float), "seed": int}
        for key, value in raw.items():
            if key not in kinds:
                raise ConfigError(f"run.{key}", f"unknown key (known keys: {', '.join(kinds)})", show_value=False)
            if isinstance(value, bool) or not isinstance(value, kinds[key]) or \
                    (key in ("generation_size", "n_trials", "timeout_s") and value <= 0):
                raise ConfigError(f"run.{key}", "must be a positive number" if key != "sampler" else "must be a string", value)
        return cls(**dict(raw))


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

    @property
    def feasible(self) -> bool:
        """True when the configuration is valid and meets every constraint of the space."""
        return self.config is not None and self.violation <= 0.0

    @property
    def key(self) -> str | None:
        """Canonical hash of the configuration (the simulation cache key)."""
        return None if self.config is None else config_key(self.config)


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
        infeasible candidate whose ``reason`` says why.
        """
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
        return Candidate(params, cfg, reason=reason, violation=total, cost=cost, inventory=inv)

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
            import itertools
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
    from mvopt.config import ClusterConfig
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


# ------------------------------------------------------------------------------------------
# loading and validation


def _config_fields() -> dict[str, tuple[Any, Any]]:
    """Every leaf config path -> (type hint, dataclasses.Field)."""
    from mvopt.config import ExperimentConfig as Root
    out: dict[str, tuple[Any, Any]] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = (tp, f)
    walk(Root, "")
    out.pop("base_dir", None)
    return out


def _unknown_path(where: str, path: str, known: Sequence[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(path, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else " (see docs/configuration.md)"
    return ConfigError(where, f"{path!r} is not {what}{hint}", show_value=False)


def _check_value(where: str, path: str, value: Any, fields: Mapping[str, tuple[Any, Any]]) -> None:
    tp, f = fields[path]
    v = _coerce(tp, value, path)
    check = f.metadata.get("check")
    msg = check(v) if check is not None and v is not None else None
    if msg:
        raise ConfigError(where, f"value not allowed for {path}: {msg}", value)


def load_space(source: str | os.PathLike | Mapping[str, Any], *, name: str | None = None) -> SearchSpace:
    """Load and validate a search space from a YAML file or a mapping (see module docstring)."""
    src = "<search space>" if isinstance(source, Mapping) else str(source)
    try:
        return _load(source, name, src)
    except ConfigError as e:
        raise (e if e.source else e.with_source(src)) from None


def _load(source: str | os.PathLike | Mapping[str, Any], name: str | None, src: str) -> SearchSpace:
    if isinstance(source, Mapping):
        data, base_dir, stem = dict(source), Path.cwd(), "search"
    else:
        data = load_yaml(source)
        base_dir, stem = Path(source).resolve().parent, Path(source).stem
    if not isinstance(data, dict):
        raise ConfigError("<root>", "must be a mapping with base, parameters, ...", type(data).__name__)
    for key in data:
        if key not in _TOP_KEYS:
            raise ConfigError(str(key), f"unknown key (known keys: {', '.join(_TOP_KEYS)})", show_value=False)
    base = _load_base(data.get("base"), base_dir)
    fields = _config_fields()
    known_paths = sorted(fields)
    inv_names = sorted(inventory(base).names())

    raw_params = data.get("parameters")
    if not isinstance(raw_params, dict) or not raw_params:
        raise ConfigError("parameters", "must be a non-empty mapping of parameter -> range/choices", raw_params)
    static_env = {**flatten(config_to_dict(base)), **inventory(base).names()}
    params: list[Parameter] = []
    for pname, spec in raw_params.items():
        pname = str(pname)
        if "." in pname and pname not in fields:
            raise _unknown_path(f"parameters.{pname}", pname, known_paths, "a configuration field")
        p = parse_parameter(pname, spec, static_env)
        if "." in pname:
            for v in p.values_to_check():
                _check_value(f"parameters.{pname}", pname, v, fields)
        params.append(p)
    param_names = [p.name for p in params]
    variables = {n for n in param_names if "." not in n}

    prices = PriceTable.parse(data["prices"], "prices") if "prices" in data else None
    objectives = _parse_objectives(data.get("objectives", ["iteration_time"]), prices)

    names_ok = set(known_paths) | set(inv_names) | variables
    for p in params:
        if p.when is None:
            continue
        for n in p.when.equals:
            if n not in param_names:
                raise _unknown_path(f"parameters.{p.name}.when", n, param_names, "a parameter of this space")
            if n == p.name:
                raise ConfigError(f"parameters.{p.name}.when", "a parameter cannot depend on itself", n)
        _check_names(f"parameters.{p.name}.when", p.when.expr, names_ok)
    params = _dependency_order(params)

    derived = _parse_derived(data.get("derived") or {}, fields, known_paths, names_ok)
    used = set()
    for d in derived:
        used |= d.expr.names | (d.when.names if d.when else set())
    constraints = []
    raw_constraints = data.get("constraints") or []
    if not isinstance(raw_constraints, list):
        raise ConfigError("constraints", "must be a list of expressions", raw_constraints)
    for i, c in enumerate(raw_constraints):
        expr = _parse_expr(f"constraints[{i}]", c)
        _check_names(f"constraints[{i}]", expr, names_ok | ({"cost"} if prices else set()))
        constraints.append(Constraint(expr))
        used |= expr.names
    for p in params:
        used |= p.when.names if p.when else set()
    for v in sorted(variables - used):
        raise ConfigError(f"parameters.{v}", "is not a configuration path (no dot) and no derived value, "
                          "condition or constraint uses it", show_value=False)
    description = str(data.get("description", ""))
    space = SearchSpace(name=str(name or data.get("name") or stem), source=src, base=base,
                        parameters=tuple(params), derived=tuple(derived), constraints=tuple(constraints),
                        objectives=objectives, prices=prices, description=description,
                        run=RunDefaults.parse(data.get("run")))
    space.data = {**data, "name": space.name, "base": config_to_dict(base, include_base_dir=True)}
    space.check_some_feasible()
    return space


def _load_base(raw: Any, base_dir: Path) -> ExperimentConfig:
    if raw is None:
        raise ConfigError("base", "is required: an experiment mapping or the path of an experiment YAML",
                          show_value=False)
    if isinstance(raw, str):
        path = raw if os.path.isabs(raw) else str(base_dir / raw)
        return load_config(path)
    if isinstance(raw, Mapping):
        data = dict(raw)
        data.setdefault("base_dir", str(base_dir))
        try:
            return load_config(data)
        except ConfigError as e:
            raise ConfigError(f"base.{e.path}", e.allowed, e.value, show_value=e.show_value) from None
    raise ConfigError("base", "must be an experiment mapping or a file path", raw)


def _parse_expr(where: str, raw: Any) -> Expr:
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise ConfigError(where, "must be an expression string", raw)
    try:
        return Expr(raw)
    except ExprError as e:
        raise ConfigError(where, str(e), raw) from None


def _check_names(where: str, expr: Expr | None, known: set[str]) -> None:
    if expr is None:
        return
    for n in sorted(expr.names - known - {"None", "True", "False"}):
        raise _unknown_path(where, n, sorted(known), "a configuration field, parameter or inventory name")


def _parse_derived(raw: Any, fields: Mapping[str, Any], known_paths: list[str], names_ok: set[str]) -> list[Derived]:
    if not isinstance(raw, dict):
        raise ConfigError("derived", "must be a mapping config path -> expression", raw)
    out = []
    for path, spec in raw.items():
        where = f"derived.{path}"
        if path not in fields:
            raise _unknown_path(where, str(path), known_paths, "a configuration field")
        when = None
        if isinstance(spec, Mapping):
            unknown = sorted(set(spec) - {"value", "when"})
            if unknown or "value" not in spec:
                raise ConfigError(where, "must be an expression or a mapping {value: EXPR, when: CONDITION}", dict(spec))
            when = parse_condition(f"{where}.when", spec["when"]) if "when" in spec else None
            spec = spec["value"]
        expr = _parse_expr(where, spec)
        _check_names(where, expr, names_ok)
        if when is not None:
            _check_names(f"{where}.when", when.expr, names_ok)
            for n in when.equals:
                if n not in names_ok:
                    raise _unknown_path(f"{where}.when", n, sorted(names_ok), "a known name")
        out.append(Derived(str(path), expr, when))
    return out


def _parse_objectives(raw: Any, prices: PriceTable | None) -> tuple[Objective, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ConfigError("objectives", f"must be a non-empty list of {', '.join(OBJECTIVES)}", raw)
    out = []
    for i, o in enumerate(raw):
        if o not in OBJECTIVES:
            raise ConfigError(f"objectives[{i}]", f"must be one of {', '.join(OBJECTIVES)}", o)
        if o == "cost" and prices is None:
            raise ConfigError(f"objectives[{i}]", "'cost' needs a `prices:` table in the search space", o)
        out.append(Objective(o))
    if len({o.name for o in out}) != len(out):
        raise ConfigError("objectives", "must not repeat an objective", raw)
    return tuple(out)


def _dependency_order(params: list[Parameter]) -> list[Parameter]:
    by_name = {p.name: p for p in params}
    order: list[Parameter] = []
    state: dict[str, int] = {}

    def visit(p: Parameter, chain: tuple[str, ...]) -> None:
        if state.get(p.name) == 2:
            return
        if state.get(p.name) == 1:
            raise ConfigError(f"parameters.{p.name}.when", "conditions form a cycle: " + " -> ".join(chain + (p.name,)),
                              show_value=False)
        state[p.name] = 1
        for dep in sorted(p.when.names if p.when else ()):
            if dep in by_name:
                visit(by_name[dep], chain + (p.name,))
        state[p.name] = 2
        order.append(p)
    for p in params:
        visit(p, ())
    return order
