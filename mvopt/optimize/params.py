"""The parameters of a search space: integer and float ranges, categorical choices, divisors.

Each parameter knows its Optuna distribution (through ``suggest``), its grid (for the grid
sampler) and its activation condition (``when``). :func:`parse_parameter` turns one entry of a
search-space file into a parameter, raising :class:`ConfigError` naming the entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from mvopt.errors import ConfigError
from mvopt.optimize.expr import Expr, ExprError

__all__ = ["Parameter", "IntParam", "FloatParam", "CategoricalParam", "Condition", "parse_parameter",
           "TrialLike", "divisors"]


class TrialLike(Protocol):
    """The part of :class:`optuna.trial.Trial` a search space uses (a random stand-in exists too)."""

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int: ...
    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float: ...
    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...


@dataclass(frozen=True)
class Condition:
    """When a parameter exists: ``{param: value-or-list}`` (all must hold) or an expression."""

    equals: Mapping[str, tuple[Any, ...]]
    expr: Expr | None = None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.equals) | (self.expr.names if self.expr else frozenset())

    def holds(self, env: Mapping[str, Any]) -> bool:
        for name, allowed in self.equals.items():
            if name not in env or env[name] not in allowed:
                return False
        return bool(self.expr.evaluate(env)) if self.expr is not None else True


@dataclass(frozen=True)
class Parameter:
    """Base of every parameter: a dotted config path (or a free variable) and a condition."""

    name: str
    when: Condition | None

    def suggest(self, trial: TrialLike) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def grid(self) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def values_to_check(self) -> list[Any]:
        """A few values that must each be acceptable for the config field (ends, choices)."""
        raise NotImplementedError  # pragma: no cover

    def grid_size(self) -> int:
        """``len(self.grid())`` without building the grid."""
        return len(self.grid())

    def can_take(self, value: Any) -> bool:  # pragma: no cover - abstract
        """Whether a trial can give this parameter `value` (a `when` that needs another is dead)."""
        raise NotImplementedError

    def describe_values(self) -> str:  # pragma: no cover - abstract
        """What values it takes, for messages."""
        raise NotImplementedError


@dataclass(frozen=True)
class IntParam(Parameter):
    low: int
    high: int
    step: int = 1
    log: bool = False

    def suggest(self, trial: TrialLike) -> int:
        return trial.suggest_int(self.name, self.low, self.high, step=self.step, log=self.log)

    def grid(self) -> list[int]:
        return list(range(self.low, self.high + 1, self.step))

    def grid_size(self) -> int:
        return (self.high - self.low) // self.step + 1

    def values_to_check(self) -> list[int]:
        return [self.low, self.low + (self.high - self.low) // self.step * self.step]

    def can_take(self, value: Any) -> bool:
        # (2.0 as well as 2: a condition compares with ==)
        return _number(value) and float(value).is_integer() and self.low <= value <= self.high \
            and (int(value) - self.low) % self.step == 0

    def describe_values(self) -> str:
        return f"integers {self.low} to {self.high}" + (f" in steps of {self.step}" if self.step != 1 else "")


@dataclass(frozen=True)
class FloatParam(Parameter):
    low: float
    high: float
    step: float | None = None
    log: bool = False
    grid_values: tuple[float, ...] | None = None

    def suggest(self, trial: TrialLike) -> float:
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def grid(self) -> list[float]:
        if self.grid_values is not None:
            return list(self.grid_values)
        if self.step is None:
            raise ConfigError(f"parameters.{self.name}", "needs `step` or `grid` (a list of values) "
                              "to be searched by the grid sampler", show_value=False)
        n = int(math.floor((self.high - self.low) / self.step + 1e-9))
        return [round(self.low + i * self.step, 12) for i in range(n + 1)]

    def values_to_check(self) -> list[float]:
        return [self.low, self.high]

    def can_take(self, value: Any) -> bool:
        # (the grid values bind the grid sampler only: the others take any value of the range)
        if not _number(value) or not self.low <= value <= self.high:
            return False
        if self.step is None:
            return True
        nearest = self.low + round((value - self.low) / self.step) * self.step
        return abs(nearest - value) <= 1e-9 * max(1.0, abs(value))

    def describe_values(self) -> str:
        return f"numbers from {self.low:g} to {self.high:g}" + (f" in steps of {self.step:g}" if self.step else "")


@dataclass(frozen=True)
class CategoricalParam(Parameter):
    choices: tuple[Any, ...]

    def suggest(self, trial: TrialLike) -> Any:
        return trial.suggest_categorical(self.name, list(self.choices))

    def grid(self) -> list[Any]:
        return list(self.choices)

    def values_to_check(self) -> list[Any]:
        return list(self.choices)

    def can_take(self, value: Any) -> bool:
        return any(value == c and isinstance(value, bool) == isinstance(c, bool) for c in self.choices)

    def describe_values(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


_KEYS = {"type", "low", "high", "step", "log", "choices", "divisor_of", "min", "max", "when", "grid", "doc"}
_TYPES = ("int", "float", "categorical", "divisor")


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def parse_condition(where: str, spec: Any) -> Condition:
    """A ``when:`` entry: a mapping param -> value (or list of values), or an expression string."""
    if isinstance(spec, str):
        try:
            return Condition({}, Expr(spec))
        except ExprError as e:
            raise ConfigError(where, str(e), spec) from None
    if isinstance(spec, Mapping) and spec:
        return Condition({str(k): tuple(v) if isinstance(v, (list, tuple)) else (v,) for k, v in spec.items()})
    raise ConfigError(where, "must be a mapping {parameter: value or [values]} or an expression string", spec)


def parse_parameter(name: str, spec: Any, static_env: Mapping[str, Any]) -> Parameter:
    """One ``parameters:`` entry. ``static_env`` holds the base experiment's names (for divisor_of)."""
    where = f"parameters.{name}"
    if isinstance(spec, list):
        spec = {"choices": spec}
    if not isinstance(spec, Mapping):
        raise ConfigError(where, "must be a mapping (type, low/high, choices, divisor_of...) or a list of choices", spec)
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", f"unknown key (known keys: {', '.join(sorted(_KEYS))})",
                          show_value=False)
    when = parse_condition(f"{where}.when", spec["when"]) if "when" in spec else None
    kind = spec.get("type") or _infer_type(spec)
    if kind not in _TYPES:
        raise ConfigError(f"{where}.type", f"must be one of {', '.join(_TYPES)}", kind)
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"{where}.choices", "must be a non-empty list", choices)
        if len({repr(c) for c in choices}) != len(choices):
            raise ConfigError(f"{where}.choices", "must not repeat a value", choices)
        return CategoricalParam(name, when, tuple(choices))
    if kind == "divisor":
        return CategoricalParam(name, when, tuple(_divisor_choices(where, spec, static_env)))
    low, high = spec.get("low"), spec.get("high")
    if not _num(low) or not _num(high):
        raise ConfigError(where, "needs numeric `low` and `high`", {"low": low, "high": high})
    if low > high:
        raise ConfigError(where, f"has an empty range: low ({low}) > high ({high})", {"low": low, "high": high})
    log, step = bool(spec.get("log", False)), spec.get("step")
    if log and low <= 0:
        raise ConfigError(f"{where}.low", "must be > 0 with log: true", low)
    if log and step is not None:
        raise ConfigError(f"{where}.step", "cannot be combined with log: true", step)
    if step is not None and (not _num(step) or step <= 0):
        raise ConfigError(f"{where}.step", "must be a number > 0", step)
    if kind == "int":
        if not all(isinstance(v, int) for v in (low, high)) or (step is not None and not isinstance(step, int)):
            raise ConfigError(where, "an int parameter needs integer low, high and step", {"low": low, "high": high})
        return IntParam(name, when, low, high, step or 1, log)
    grid = spec.get("grid")
    if grid is not None and (not isinstance(grid, list) or not all(_num(g) and low <= g <= high for g in grid)):
        raise ConfigError(f"{where}.grid", f"must be a list of numbers within [{low}, {high}]", grid)
    return FloatParam(name, when, float(low), float(high), None if step is None else float(step), log,
                      None if grid is None else tuple(float(g) for g in grid))


def _infer_type(spec: Mapping[str, Any]) -> str:
    if "choices" in spec:
        return "categorical"
    if "divisor_of" in spec:
        return "divisor"
    ints = all(isinstance(spec.get(k), int) and not isinstance(spec.get(k), bool) for k in ("low", "high"))
    return "int" if ints and isinstance(spec.get("step", 1), int) else "float"


def _divisor_choices(where: str, spec: Mapping[str, Any], env: Mapping[str, Any]) -> list[int]:
    def value(key: str) -> Any:
        try:
            return Expr(spec[key]).evaluate(env)
        except ExprError as e:
            raise ConfigError(f"{where}.{key}", f"must be an expression over the base experiment ({e})",
                              spec[key]) from None
    if "divisor_of" not in spec:
        raise ConfigError(f"{where}.divisor_of", "is required for a divisor parameter", show_value=False)
    n = value("divisor_of")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        if isinstance(n, float) and n.is_integer() and n >= 1:
            n = int(n)
        else:
            raise ConfigError(f"{where}.divisor_of", "must evaluate to an integer >= 1", n)
    lo = value("min") if "min" in spec else 1
    hi = value("max") if "max" in spec else n
    choices = [d for d in divisors(n) if lo <= d <= hi]
    if not choices:
        raise ConfigError(where, f"has an empty range: no divisor of {n} within [{lo}, {hi}]", n)
    return choices
