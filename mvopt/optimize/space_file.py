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
    scenarios:                            # every trial simulated once per scenario (optional)
      healthy: {}
      spine_down: {cluster.failed_links: [[2, 0]]}
    scenario_objective: mean              # iteration_time over the scenarios: mean or worst

:func:`load_space` validates everything before any simulation: parameter paths against the
configuration schema, every range and choice against the field's type and checks, every name
an expression uses, conditions only on parameters of the space, and (by sampling the space a
bounded number of times, without simulation) that at least one point is valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path
from typing import Any, Mapping, Sequence, get_type_hints

from mvopt._cfg.base import _coerce  # field-level type coercion, without cross-field checks
from mvopt.config import ExperimentConfig, config_to_dict, load_config, load_yaml, with_overrides
from mvopt.errors import ConfigError
from mvopt.optimize.cost import PriceTable
from mvopt.optimize.expr import Expr, ExprError
from mvopt.optimize.inventory import inventory
from mvopt.optimize.params import Parameter, parse_condition, parse_parameter
from mvopt.optimize.samplers import sampler_names
from mvopt.optimize.scenarios import SCENARIO_OBJECTIVES, Scenario, parse_scenarios
from mvopt.optimize.space import OBJECTIVES, Constraint, Derived, Objective, RunDefaults, SearchSpace, flatten

__all__ = ["load_space"]

_TOP_KEYS = ("name", "description", "base", "parameters", "derived", "constraints", "prices", "objectives", "run",
             "scenarios", "scenario_objective")


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


def load_space(source: str | os.PathLike | Mapping[str, Any], *, name: str | None = None,
               base_overrides: Mapping[str, Any] | None = None, strict: bool = True,
               fidelity: str | None = None) -> SearchSpace:
    """Load and validate a search space from a YAML file or a mapping (see module docstring).

    ``base_overrides`` (dotted config path -> value) change the base experiment before anything
    else is checked (``optimize --set``: e.g. a shorter ``simulation.time_limit_ms`` or a smaller
    ``collective.bytes`` for a quick run); the stored space carries the changed base.
    ``strict=False`` skips the checks that only catch mistakes (a `when` value its parameter
    never takes, an unknown run.sampler), for spaces stored in studies by earlier versions.
    ``fidelity`` (``--fidelity``) replaces ``run.fidelity``; either sets the base experiment's
    ``simulation.fidelity`` (:mod:`mvopt.optimize.fidelity`).
    """
    src = "<search space>" if isinstance(source, Mapping) else str(source)
    try:
        return _load(source, name, src, base_overrides or {}, strict, fidelity)
    except ConfigError as e:
        raise (e if e.source else e.with_source(src)) from None


def _load(source: str | os.PathLike | Mapping[str, Any], name: str | None, src: str,
          base_overrides: Mapping[str, Any], strict: bool = True, fidelity: str | None = None) -> SearchSpace:
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
    run = RunDefaults.parse(data.get("run"))
    if fidelity is not None:
        run = RunDefaults.parse({**(data.get("run") or {}), "fidelity": fidelity})
        data["run"] = {**(data.get("run") or {}), "fidelity": fidelity}
    if run.fidelity_of_base is not None:
        base_overrides = {**base_overrides, "simulation.fidelity": run.fidelity_of_base}
    base = _load_base(data.get("base"), base_dir)
    fields = _config_fields()
    if base_overrides:
        base = _override_base(base, base_overrides, fields)
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
    by_name = {q.name: q for q in params}
    for p in params:
        if p.when is None:
            continue
        for n, allowed in p.when.equals.items():
            if n not in param_names:
                raise _unknown_path(f"parameters.{p.name}.when", n, param_names, "a parameter of this space")
            if n == p.name:
                raise ConfigError(f"parameters.{p.name}.when", "a parameter cannot depend on itself", n)
            never = [v for v in allowed if not by_name[n].can_take(v)]
            if strict and never:      # (a value it never takes: the parameter would never apply there)
                raise ConfigError(f"parameters.{p.name}.when.{n}", f"must be a value {n} takes "
                                  f"({by_name[n].describe_values()})", never[0])
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
    scenarios, scenario_objective = _parse_scenarios(data, fields, known_paths, param_names, derived, objectives)
    description = str(data.get("description", ""))
    if strict and run.sampler not in sampler_names():   # (whether it suits the objectives: where it is used)
        raise ConfigError("run.sampler", f"must be a sampler's name ({', '.join(sampler_names())})", run.sampler)
    space = SearchSpace(name=str(name or data.get("name") or stem), source=src, base=base,
                        parameters=tuple(params), derived=tuple(derived), constraints=tuple(constraints),
                        objectives=objectives, prices=prices, description=description,
                        run=run, scenarios=scenarios, scenario_objective=scenario_objective)
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


def _override_base(base: ExperimentConfig, overrides: Mapping[str, Any],
                   fields: Mapping[str, tuple[Any, Any]]) -> ExperimentConfig:
    sections = {p.rsplit(".", 1)[0] for p in fields if "." in p}
    for path in overrides:
        if path not in fields and path not in sections:
            raise _unknown_path(f"base.{path}", path, sorted(fields), "a configuration field")
    try:
        return with_overrides(base, dict(overrides))
    except ConfigError as e:
        raise ConfigError(f"base.{e.path}", e.allowed, e.value, show_value=e.show_value) from None


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


def _parse_scenarios(data: Mapping[str, Any], fields: Mapping[str, tuple[Any, Any]], known_paths: list[str],
                     param_names: Sequence[str], derived: Sequence[Derived],
                     objectives: Sequence[Objective]) -> tuple[tuple[Scenario, ...], str]:
    """``scenarios`` and ``scenario_objective``: paths are configuration fields with values they
    accept, none a parameter or derived value of the space (the scenario would overwrite it)."""
    searched = set(param_names) | {d.path for d in derived}

    def check(where: str, path: str, value: Any) -> None:
        if path not in fields:
            raise _unknown_path(where, path, known_paths, "a configuration field")
        if path in searched:
            raise ConfigError(where, f"{path} is a parameter or derived value of the space: a scenario must set "
                              "fields the search leaves alone", show_value=False)
        _check_value(where, path, value, fields)

    scenarios = parse_scenarios(data.get("scenarios"), check)
    how = data.get("scenario_objective", "mean")
    if how not in SCENARIO_OBJECTIVES:
        raise ConfigError("scenario_objective", f"must be one of {', '.join(SCENARIO_OBJECTIVES)}", how)
    names = [o.name for o in objectives]
    if "scenario_objective" in data and not scenarios:
        raise ConfigError("scenario_objective", "needs `scenarios:` (what the iteration time is a mean or worst of)", how)
    if "worst_iteration_time" in names:
        if not scenarios:
            raise ConfigError("objectives", "'worst_iteration_time' needs `scenarios:` in the search space",
                              "worst_iteration_time")
        if how == "worst" and "iteration_time" in names:
            raise ConfigError("objectives", "with scenario_objective: worst, iteration_time is the worst scenario's "
                              "time already: list one of iteration_time, worst_iteration_time", names)
    return scenarios, how


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
