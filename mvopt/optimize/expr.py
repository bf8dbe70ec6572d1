"""Small, safe arithmetic expressions used by search spaces (derived values and constraints).

An expression is Python syntax restricted to numbers, strings, names, dotted names
(``parallelism.tp``), arithmetic (``+ - * / // % **``), comparisons, ``and``/``or``/``not``,
``x if c else y`` and a few functions (:data:`FUNCTIONS`). Names are looked up in a flat mapping
of dotted paths; nothing else (attributes, subscripts, imports) is reachable.

What an expression may compute is bounded as well, because a space file may come from someone
else and every worker of a study evaluates it: integers of at most :data:`MAX_INT_BITS` bits
(``**`` is refused before it computes a larger one), strings and lists of at most
:data:`MAX_LENGTH` items, :data:`MAX_STEPS` evaluation steps and :data:`MAX_SOURCE_CHARS`
characters of source. Anything beyond is an :class:`ExprError` naming the expression and the limit.

>>> Expr("gpus // (parallelism.tp * parallelism.pp)").evaluate({"gpus": 64, "parallelism.tp": 2, "parallelism.pp": 4})
8
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from typing import Any, Callable, Mapping

from mvopt.errors import MvoptError

__all__ = ["Expr", "ExprError", "FUNCTIONS", "MAX_INT_BITS", "MAX_LENGTH", "MAX_STEPS", "MAX_SOURCE_CHARS"]

MAX_INT_BITS = 256         # an integer's size (2**256 ~ 1.2e77: far above any count or byte size)
MAX_LENGTH = 10_000        # items of a list, characters of a string
MAX_STEPS = 10_000         # nodes visited by one evaluation
MAX_SOURCE_CHARS = 4_000   # characters of an expression
MAX_ROUND_DIGITS = 400     # |ndigits| of round(): round(x, -n) computes 10**n

class ExprError(ValueError):
    """A malformed expression, an unknown name, a failed evaluation, or one beyond the limits."""


class _Limit(Exception):
    """An operation beyond a limit (becomes an ExprError naming the expression)."""


def _pow(base: Any, exp: Any) -> Any:
    # An integer power's size is known before it is computed: refuse it then, not after.
    if isinstance(base, int) and isinstance(exp, int) and exp > 0 and abs(base) > 1:
        bits = (abs(base).bit_length() - 1) * exp + 1
        if bits > MAX_INT_BITS:
            raise _Limit(f"{base} ** {exp} would have about {bits} bits (integers have at most {MAX_INT_BITS})")
    return operator.pow(base, exp)


def _mul(a: Any, b: Any) -> Any:
    # A string or list times an integer: its length is known before it is built.
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, list)) and isinstance(n, int) and len(seq) * n > MAX_LENGTH:
            raise _Limit(f"a {type(seq).__name__} of {len(seq)} x {n} items (at most {MAX_LENGTH})")
    return operator.mul(a, b)


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str):  # printf-style formatting, whose width is unbounded
        raise TypeError("% takes numbers, not a string")
    return operator.mod(a, b)


def _round(x: Any, ndigits: Any = None) -> Any:
    if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:
        raise _Limit(f"round()'s digits within +-{MAX_ROUND_DIGITS}, got {ndigits}")
    return round(x) if ndigits is None else round(x, ndigits)


def _check_size(v: Any) -> Any:
    if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise _Limit(f"an integer of {v.bit_length()} bits (at most {MAX_INT_BITS})")
    if isinstance(v, (str, list)) and len(v) > MAX_LENGTH:
        raise _Limit(f"a {type(v).__name__} of {len(v)} items (at most {MAX_LENGTH})")
    if isinstance(v, complex):
        raise ValueError("the result is a complex number")
    return v


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": _round,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "sqrt": math.sqrt,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: _mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: _mod, ast.Pow: _pow,
}
_UNARYOPS: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}


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
        if len(self.source) > MAX_SOURCE_CHARS:
            raise ExprError(f"{self.source[:60]!r}...: an expression of {len(self.source)} characters "
                            f"(at most {MAX_SOURCE_CHARS})")
        try:
            with warnings.catch_warnings():  # ("x is 1" warns at parse time; it is still an expression)
                warnings.simplefilter("ignore", SyntaxWarning)
                self._tree = ast.parse(self.source, mode="eval").body
            self.names = frozenset(self._collect(self._tree))
        except ExprError:
            raise
        except SyntaxError as e:
            raise ExprError(f"invalid expression {self.source!r}: {e.msg}") from None
        except ValueError as e:  # e.g. a NUL character
            raise ExprError(f"invalid expression {self.source!r}: {e}") from None
        except (RecursionError, MemoryError):
            raise ExprError(f"invalid expression {self.source!r}: nested too deeply") from None

    def _collect(self, node: ast.AST) -> set[str]:
        name = _dotted(node)
        if name is not None:
            return {name}
        if isinstance(node, ast.Call):
            fname = node.func.id if isinstance(node.func, ast.Name) else None
            if fname not in FUNCTIONS or node.keywords:
                raise ExprError(f"{self.source!r}: only these functions are allowed: {', '.join(FUNCTIONS)}")
            return set().union(*(self._collect(a) for a in node.args)) if node.args else set()
        ops = _BINOPS if isinstance(node, ast.BinOp) else _UNARYOPS if isinstance(node, ast.UnaryOp) else None
        if ops is not None and type(node.op) not in ops:  # type: ignore[attr-defined]
            raise ExprError(f"{self.source!r}: the operator {type(node.op).__name__} is not allowed in an expression")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, type(None))):
            raise ExprError(f"{self.source!r}: {type(node.value).__name__} constants are not allowed in an expression")
        allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
                   ast.List, ast.Tuple, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Load)
        if not isinstance(node, allowed):
            raise ExprError(f"{self.source!r}: {type(node).__name__} is not allowed in an expression")
        out: set[str] = set()
        for child in ast.iter_child_nodes(node):
            out |= self._collect(child)
        return out

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The value of the expression; unknown names, arithmetic errors and results beyond the
        limits (module docstring) raise ExprError."""
        return self._run(self._tree, env)

    def _run(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        try:
            return self._eval(node, env, [MAX_STEPS])
        except (ExprError, MvoptError):  # MvoptError: raised by a lazy name (e.g. an invalid cluster)
            raise
        except _Limit as e:
            raise ExprError(f"{self.source!r}: beyond what an expression may compute: {e}") from None
        except RecursionError:
            raise ExprError(f"{self.source!r}: nested too deeply") from None
        except (ArithmeticError, TypeError, ValueError) as e:
            raise ExprError(f"{self.source!r}: {e}") from None

    def _eval(self, node: ast.AST, env: Mapping[str, Any], steps: list[int]) -> Any:
        steps[0] -= 1
        if steps[0] < 0:
            raise _Limit(f"more than {MAX_STEPS} evaluation steps")
        name = _dotted(node)
        if name is not None:
            if name not in env:
                raise ExprError(f"{self.source!r}: unknown name {name!r}")
            return env[name]
        if isinstance(node, ast.Constant):
            return _check_size(node.value)
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, env, steps), self._eval(node.right, env, steps)
            return _check_size(_BINOPS[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp):
            return _UNARYOPS[type(node.op)](self._eval(node.operand, env, steps))
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env, steps)
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, env, steps)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            values = (self._eval(v, env, steps) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, env, steps) else node.orelse, env, steps)
        if isinstance(node, (ast.List, ast.Tuple)):
            return _check_size([self._eval(e, env, steps) for e in node.elts])
        if isinstance(node, ast.Call):
            args = [self._eval(a, env, steps) for a in node.args]
            return _check_size(FUNCTIONS[node.func.id](*args))  # type: ignore[attr-defined]
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
            a, b = self._run(node.left, env), self._run(node.comparators[0], env)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                gap = (a - b) if isinstance(node.ops[0], (ast.Lt, ast.LtE)) else (b - a)
                scale = abs(b) if b else 1.0
                return max(float(gap) / scale, 1e-9)
        return 1.0

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"
