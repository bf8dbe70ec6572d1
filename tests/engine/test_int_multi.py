"""network.hpcc.int_multi: INT recorded as the HPCC simulator's switches record it (int-header.h),
read with wrap-around; kernels equal to the reference with it (and the random experiments of
test_engine_reference.py draw it)."""

from __future__ import annotations

import pytest

from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder
from mvopt.engine.reference import IntHop, int_hop, int_hop_delta
from mvopt.errors import ConfigError
from mvopt.testing import scenarios as sc

from engine_cases import assert_matches_reference, compiled, run1

G100 = 100 * 10**9


def test_a_record_in_the_simulators_units() -> None:
    """t = 1,234,567 ps -> 1,234 ns; 1,000,000 B / (128 x 4) = 1,953.125 -> 1,953; 10,000 B /
    (80 x 4) = 31.25 -> 31; m = 0 keeps the exact values."""
    assert int_hop(1_234_567, 1_000_000, 10_000, G100, 4) == IntHop(1_234, 1_953, 31, G100)
    assert int_hop(1_234_567, 1_000_000, 10_000, G100, 0) == IntHop(1_234_567, 1_000_000, 10_000, G100)


def test_deltas_wrap_as_the_simulators_counters() -> None:
    """The time counter wraps at 2^24 ns, the bytes at 2^20 units: a later record with smaller
    counters is read across the wrap; the queue is the lesser, in bytes."""
    old = int_hop((2**24 - 10) * 1000, (2**20 - 3) * 512, 8 * 320, G100, 4)
    new = int_hop((2**24 + 90) * 1000, (2**20 + 5) * 512, 2 * 320, G100, 4)
    assert (new.ts_ps, new.tx_bytes) == (90, 5)
    assert int_hop_delta(new, old, 4) == (100_000, 8 * 512, 2 * 320)
    assert int_hop_delta(int_hop(5_000, 700, 90, G100, 0), int_hop(2_000, 100, 60, G100, 0), 0) == (3_000, 600, 60)


@pytest.mark.parametrize("m", [1, 4])
def test_an_hpcc_incast_with_quantised_int_matches_the_reference(backend, m: int) -> None:
    """Eight senders into one host under HPCC: the rates follow the quantised INT (they differ
    from the exact INT's), the kernels as the reference."""
    g = TaskGraphBuilder()
    for s in range(1, 9):
        g.flow(s, 0, 300_000)
    exact, quantised = (sc.experiment(compiled(sc.star(9)), g, cc="hpcc", hpcc={"int_multi": x}) for x in (None, m))
    r = run1(backend, quantised)
    assert r.status == "done", r.diagnostic
    assert_matches_reference(r, quantised)
    assert r.flow_fct_ps.tolist() != run1(backend, exact).flow_fct_ps.tolist()


def test_int_multi_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"network\.hpcc\.int_multi"):
        load_config({"network": {"hpcc": {"int_multi": 0}}})
