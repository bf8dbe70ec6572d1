"""Strict, typed configuration sections: the machinery behind :mod:`mvopt.config`.

A section is a frozen dataclass whose fields are declared with :func:`field`, which records the
documentation, unit and allowed values beside the default. :func:`build` turns a plain dict (from
YAML) into a section, rejecting unknown keys and ill-typed values with a :class:`ConfigError` that
names the full dotted path; each section may add cross-field checks in ``_check(path)``.
:func:`to_dict` is the inverse (canonical, YAML-ready). :func:`describe` walks the sections to
generate the configuration reference in docs/.
"""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Any, Callable, Literal, Union, get_args, get_origin, get_type_hints

from mvopt.errors import ConfigError

__all__ = ["field", "build", "to_dict", "describe", "Section", "replace_path", "get_path"]

MISSING = dataclasses.MISSING


def field(default: Any = MISSING, *, doc: str, unit: str | None = None,
          check: Callable[[Any], str | None] | None = None, default_doc: str | None = None) -> Any:
    """Declare a configuration field.

    ``check(value)`` returns None when the value is allowed, else the sentence saying what is
    allowed (``"must be an even integer >= 2"``). ``default_doc`` documents a computed default
    (a field left at None and resolved from others).
    """
    meta = {"doc": doc, "unit": unit, "check": check, "default_doc": default_doc}
    if isinstance(default, (list, dict)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta)
    if dataclasses.is_dataclass(default) and not isinstance(default, type):
        inst = default
        return dataclasses.field(default_factory=lambda: inst, metadata=meta)
    if isinstance(default, type) and dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=default, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class Section:
    """Base of every configuration section (frozen dataclasses)."""

    def _check(self, path: str) -> None:  # cross-field validation; override
        return None


# ---------------------------------------------------------------------------------------------
# reusable checks


def positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def at_least(lo: float) -> Callable[[Any], str | None]:
    def chk(v: Any) -> str | None:
        return None if v >= lo else f"must be >= {lo}"
    return chk


def in_range(lo: float, hi: float) -> Callable[[Any], str | None]:
    def chk(v: Any) -> str | None:
        return None if lo <= v <= hi else f"must be between {lo} and {hi}"
    return chk


def each(inner: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    def chk(v: Any) -> str | None:
        for x in v:
            msg = inner(x)
            if msg:
                return f"every element {msg}"
        return None
    return chk


# ---------------------------------------------------------------------------------------------
# type coercion


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        inner = " or ".join(_type_name(a) for a in args)
        return inner + (" or null" if len(args) < len(get_args(tp)) else "")
    if origin in (list, tuple):
        (arg, *_) = get_args(tp) or (Any,)
        return f"a list of {_type_name(arg)}"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value in get_args(tp) and type(value) in {type(a) for a in get_args(tp)}:
            return value
        raise ConfigError(path, f"must be {_type_name(tp)}", value)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, path)
            except ConfigError as e:
                errors.append(e)
        if len(errors) == 1:
            raise errors[0]
        raise ConfigError(path, f"must be {_type_name(tp)}", value)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"must be {_type_name(tp)}", value)
        (arg, *_) = get_args(tp) or (Any,)
        return tuple(_coerce(arg, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, "must be a mapping", value)
        return dict(value)
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(path, "must be true or false", value)
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(path, "must be an integer", value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(path, "must be an integer", value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, "must be a number", value)
        if not math.isfinite(value):
            raise ConfigError(path, "must be a finite number", value)
        return float(value)
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(path, "must be a string", value)
    raise TypeError(f"unsupported config type {tp!r} at {path}")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def build(cls: type, data: Any, path: str = "") -> Any:
    """Build section ``cls`` from a mapping; unknown keys and bad values raise ConfigError."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(path or "<root>", "must be a mapping", data)
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(_join(path, str(key)), f"unknown key (known keys here: {known})",
                              show_value=False)
    kwargs = {}
    for name, f in fields.items():
        fpath = _join(path, name)
        if name in data:
            value = _coerce(hints[name], data[name], fpath)
        elif f.default is not MISSING:
            value = f.default
        elif f.default_factory is not MISSING:  # type: ignore[misc]
            value = f.default_factory()  # type: ignore[misc]
            if dataclasses.is_dataclass(value):
                value = build(type(value), {}, fpath)
        else:
            raise ConfigError(fpath, "is required", show_value=False)
        check = f.metadata.get("check")
        if check is not None and value is not None:
            msg = check(value)
            if msg:
                raise ConfigError(fpath, msg, list(value) if isinstance(value, tuple) else value)
        msg = _representable(f.metadata.get("unit"), value)
        if msg:
            raise ConfigError(fpath, msg, list(value) if isinstance(value, tuple) else value)
        kwargs[name] = value
    obj = cls(**kwargs)
    if isinstance(obj, Section):
        obj._check(path)
    return obj


# The largest value of each unit that the engine represents exactly: times become int64
# picoseconds (up to 10^18 ps, about 11.6 days, below the clocks' "never"), sizes int64 bytes
# exact in float64 arithmetic (2^53), rates int64 bits per second (up to 1 Pb/s).
_UNIT_MAX = {"ns": 1e15, "us": 1e12, "ms": 1e9, "B": 2.0**53, "KB": 2.0**53 / 1e3, "MB": 2.0**53 / 1e6,
             "GiB": 2.0**53 / 2**30, "Gb/s": 1e6, "Mb/s": 1e9}


def _representable(unit: str | None, value: Any) -> str | None:
    """None when every number of `value` (a number, or a list of them) fits its unit's range."""
    top = _UNIT_MAX.get(unit or "")
    if top is None or value is None:
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(v, (int, float)) and not isinstance(v, bool) and v > top for v in values):
        return f"must be at most {top:.4g} {unit} (what the engine's 64-bit clocks, sizes and rates hold)"
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def to_dict(obj: Any) -> Any:
    """Canonical plain-data form of a section (tuples become lists), YAML/JSON ready."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def get_path(data: dict, path: str) -> Any:
    """Value at a dotted path of a plain dict."""
    cur: Any = data
    for part in path.split("."):
        cur = cur[part]
    return cur


def replace_path(data: dict, path: str, value: Any) -> dict:
    """A copy of a nested plain dict with the dotted ``path`` set to ``value`` (parents created)."""
    out = dict(data)
    head, _, rest = path.partition(".")
    if rest:
        child = out.get(head)
        out[head] = replace_path(child if isinstance(child, dict) else {}, rest, value)
    else:
        out[head] = value
    return out


def describe(cls: type, path: str = "") -> list[dict[str, str]]:
    """Rows (path, type, unit, default, doc) for every field, depth first, for the docs."""
    rows = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        fpath = _join(path, f.name)
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows.append({"path": fpath, "type": "section", "unit": "", "default": "",
                         "doc": f.metadata.get("doc", "")})
            rows.extend(describe(tp, fpath))
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:  # type: ignore[misc]
            default = to_dict(f.default_factory())  # type: ignore[misc]
        else:
            default = "(required)"
        if default is None and f.metadata.get("default_doc"):
            default_s = f.metadata["default_doc"]
        else:
            default_s = "null" if default is None else repr(default) if isinstance(default, str) else str(default)
        rows.append({"path": fpath, "type": _type_name(tp), "unit": f.metadata.get("unit") or "",
                     "default": default_s, "doc": f.metadata.get("doc", "")})
    return rows
