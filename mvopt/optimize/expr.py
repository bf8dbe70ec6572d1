"""Small, safe arithmetic expressions used by search spaces (derived values and constraints).

An expression is Python syntax restricted to numbers, strings, names, dotted names
(``parallelism.tp``), arithmetic (``+ - * / // % **``), comparisons, ``and``/``or``/``not``,
``x if c else y`` and a few functions (:data:`FUNCTIONS`). Names are looked up in a flat mapping
of dotted paths; nothing else (attributes, subscripts, imports) is reachable.

>>> Expr("gpus // (parallelism.tp * parallelism.pp)").evaluate({"gpus": 64, "parallelism.tp": 2, "parallelism.pp": 4})
8
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable, Mapping

from mvopt.errors import MvoptError

__all__ = ["Expr", "ExprError", "FUNCTIONS"]

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "sqrt": math.sqrt,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}


class ExprError(ValueError):
    """A malformed expression, an unknown name, or a failed evaluation."""


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class Expr:
    """A parsed expression; :meth:`evaluate` runs it against a mapping of dotted names."""

    def __init__(self, source: str | int | float | bool) -> None:
        self.source = str(source)
        try:
            self._tree = ast.parse(self.source, mode="eval").body
        except SyntaxError as e:
            raise ExprError(f"invalid expression {self.source!r}: {e.msg}") from None
        self.names = frozenset(self._collect(self._tree))

    def _collect(self, node: ast.AST) -> set[str]:
        name = _dotted(node)
        if name is not None:
            return {name}
        if isinstance(node, ast.Call):
            fname = node.func.id if isinstance(node.func, ast.Name) else None
            if fname not in FUNCTIONS or node.keywords:
                raise ExprError(f"{self.source!r}: only these functions are allowed: {', '.join(FUNCTIONS)}")
            return set().union(*(self._collect(a) for a in node.args)) if node.args else set()
        allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
                   ast.List, ast.Tuple, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Load)
        if not isinstance(node, allowed):
            raise ExprError(f"{self.source!r}: {type(node).__name__} is not allowed in an expression")
        out: set[str] = set()
        for child in ast.iter_child_nodes(node):
            out |= self._collect(child)
        return out

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The value of the expression; unknown names and arithmetic errors raise ExprError."""
        try:
            return self._eval(self._tree, env)
        except (ExprError, MvoptError):  # MvoptError: raised by a lazy name (e.g. an invalid cluster)
            raise
        except (ArithmeticError, TypeError, ValueError) as e:
            raise ExprError(f"{self.source!r}: {e}") from None

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        name = _dotted(node)
        if name is not None:
            if name not in env:
                raise ExprError(f"{self.source!r}: unknown name {name!r}")
            return env[name]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}[type(node.op)](v)
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, env)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            values = (self._eval(v, env) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, env) else node.orelse, env)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._eval(e, env) for e in node.elts]
        if isinstance(node, ast.Call):
            return FUNCTIONS[node.func.id](*(self._eval(a, env) for a in node.args))  # type: ignore[attr-defined]
        raise ExprError(f"{self.source!r}: cannot evaluate {type(node).__name__}")  # pragma: no cover

    def violation(self, env: Mapping[str, Any]) -> float:
        """For a constraint: 0 when it holds, else how far it is from holding (> 0).

        ``a <= b`` / ``a < b`` give ``a - b`` (relative to ``|b|`` when nonzero), ``>=``/``>`` the
        reverse; any other failing condition gives 1.
        """
        if self.evaluate(env):
            return 0.0
        node = self._tree
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            a, b = self._eval(node.left, env), self._eval(node.comparators[0], env)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                gap = (a - b) if isinstance(node.ops[0], (ast.Lt, ast.LtE)) else (b - a)
                scale = abs(b) if b else 1.0
                return max(float(gap) / scale, 1e-9)
        return 1.0

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"
