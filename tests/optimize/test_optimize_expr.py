import pytest

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
