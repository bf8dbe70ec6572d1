import contextlib
import multiprocessing
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvopt.optimize import expr as expr_module
from mvopt.optimize.expr import Expr, ExprError


def test_arithmetic_and_dotted_names():
    env = {"gpus": 64, "parallelism.tp": 2, "parallelism.pp": 4}
    assert Expr("gpus // (parallelism.tp * parallelism.pp)").evaluate(env) == 8
    assert Expr("[parallelism.tp, 64 // parallelism.tp]").evaluate(env) == [2, 32]
    assert Expr("ceil(5 / 2) + max(1, parallelism.pp)").evaluate(env) == 7
    assert Expr("'a' if gpus > 10 else 'b'").evaluate(env) == "a"


def test_names_are_collected():
    assert Expr("a.b * c + min(d, 2)").names == {"a.b", "c", "d"}


@pytest.mark.parametrize("src", ["__import__('os')", "a[0]", "lambda: 1", "open('x')", "(x for x in y)", "1 +"])
def test_unsafe_or_malformed_rejected(src):
    with pytest.raises(ExprError):
        Expr(src)


def test_unknown_name_and_arithmetic_errors():
    with pytest.raises(ExprError, match="unknown name 'nope'"):
        Expr("nope + 1").evaluate({})
    with pytest.raises(ExprError):
        Expr("1 / x").evaluate({"x": 0})


def test_violation_measures_distance():
    e = Expr("cost <= 100")
    assert e.violation({"cost": 50}) == 0.0
    assert e.violation({"cost": 150}) == pytest.approx(0.5)
    assert Expr("x >= 10").violation({"x": 5}) == pytest.approx(0.5)
    assert Expr("x % 2 == 0").violation({"x": 3}) == 1.0
    assert Expr("x is None or x > 1").evaluate({"x": None}) is True


# ---------------------------------------------------------------- bounds: a space file cannot stall a worker

@pytest.mark.parametrize("src, limit", [
    ("9**9**9", "256"),                        # would never return
    ("2**300", "256"),
    ("int(1e308)", "256"),
    ("10**76 * 10**10", "256"),
    ("[0] * 10**8", "10000"),
    ("'ab' * 10**9", "10000"),
    ("round(5, -10**70)", "400"),
])
def test_results_beyond_the_limits_are_refused_naming_expression_and_limit(src, limit):
    message = _bounded(lambda: _expr_error(src), timeout_s=10)
    assert repr(src) in message and limit in message


def _expr_error(src):
    t0 = time.perf_counter()
    with pytest.raises(ExprError) as e:
        Expr(src).evaluate({})
    assert time.perf_counter() - t0 < 1.0
    return str(e.value)


def test_limits_leave_ordinary_values_alone():
    assert Expr("2**255").evaluate({}) == 2 ** 255
    assert Expr("1**(10**70) + (-1)**(10**70)").evaluate({}) == 2
    assert Expr("x ** 0.5").evaluate({"x": 16}) == 4.0
    assert Expr("[1, 2] * 3").evaluate({}) == [1, 2] * 3
    assert Expr("round(2.567, 2)").evaluate({}) == 2.57


@pytest.mark.parametrize("src, what", [
    ("1 << 3", "LShift"), ("~x", "Invert"), ("x @ x", "MatMult"), ("1j", "complex"),
    ("'%0999999999d' % 1", "not a string"), ("(-8) ** 0.5", "complex"),
    ("-" * 3000 + "1", "nested too deeply"), ("x + " * 1500 + "1", "at most 4000"), ("a\x00", "null"),
])
def test_operators_and_inputs_outside_the_language_are_expr_errors(src, what):
    with pytest.raises(ExprError, match=what):
        Expr(src).evaluate({"x": 1})


def test_evaluation_steps_are_bounded(monkeypatch):
    monkeypatch.setattr(expr_module, "MAX_STEPS", 10)
    with pytest.raises(ExprError, match="more than 10 evaluation steps"):
        Expr("1 + 1 + 1 + 1 + 1 + 1 + 1 + 1").evaluate({})


class _Hang(Exception):
    pass


@contextlib.contextmanager
def _time_bound(seconds: float):
    """Fail instead of hanging: SIGALRM interrupts an evaluation that never returns."""
    def alarm(signum, frame):
        raise _Hang(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_NAMES = {"x": 3, "y": -2.5, "big": 2 ** 200, "s": "ab", "lst": [1, 2, 3], "parallelism.tp": 8}
_ATOMS = st.one_of(
    st.integers(-10 ** 80, 10 ** 80).map(str), st.floats(allow_nan=False).map(repr),
    st.sampled_from(sorted(_NAMES)), st.sampled_from(["'ab'", "[1, 2]", "None", "True", "1e308", "9"]))
_BINARY = ["+", "-", "*", "/", "//", "%", "**", "<<", "&", "@", "<", "==", " in ", " is ", " and ", " or "]
_CALLS = ["min", "max", "abs", "int", "float", "round", "ceil", "floor", "log2", "sqrt", "len", "__import__"]


def _grow(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(_BINARY), children).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
        st.tuples(st.sampled_from(["-", "+", "not ", "~"]), children).map(lambda t: f"({t[0]}{t[1]})"),
        st.tuples(st.sampled_from(_CALLS), st.lists(children, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.lists(children, max_size=4).map(lambda xs: f"[{', '.join(xs)}]"),
    )


_EXPRESSIONS = st.recursive(_ATOMS, _grow, max_leaves=25)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(st.one_of(_EXPRESSIONS, st.text(max_size=60)))
def _fuzz(src):
    with _time_bound(2.0):
        try:
            Expr(src).evaluate(_NAMES)
        except ExprError:
            pass


def _child(conn, target):
    try:
        conn.send(("ok", target()))
    except BaseException as e:  # (hypothesis reports the falsifying example in the message)
        conn.send(("failed", f"{type(e).__name__}: {e}"))


def _bounded(target, *, timeout_s):
    """``target()``'s result, computed in a child process that is killed after ``timeout_s``:
    a C-level computation (a huge power) cannot be interrupted by a signal."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, target))
    proc.start()
    try:
        assert parent.poll(timeout_s), f"no answer within {timeout_s} s (an expression that never returns)"
        status, value = parent.recv()
    finally:
        proc.kill()
        proc.join()
    assert status == "ok", value
    return value


def test_fuzz_any_input_answers_quickly_with_a_value_or_an_expr_error():
    """Random expressions (allowed and not) and random text: each gives a value or an ExprError
    within 2 s, and the whole run within 120 s."""
    _bounded(_fuzz, timeout_s=120)
