"""TIMELY (Mittal et al., SIGCOMM'15): the rate follows Algorithm 1 sample by sample, and the
engine matches the reference simulator bit for bit.

The RTT samples are the reference simulator's (one timed packet per flow, docs/engine.md); the
rates are recomputed here from those samples alone, by the paper's rule, and compared with the
rates the simulator set. The engine follows the same samples and the same rule exactly when its
results equal the reference's.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from mvopt.engine import TaskGraphBuilder
from mvopt.engine import reference
from mvopt.engine.reference import simulate_reference
from mvopt.testing import scenarios as sc

from engine_cases import A_ACK, D, RATE, T, assert_matches_reference, compiled, experiments, incast, run1

# thresholds in the range of a one-switch star's RTTs (4.177 us unloaded), so that every rule is used
SMALL = {"t_low_us": 4.18, "t_high_us": 12.0, "min_rtt_us": 4.0, "delta_mbps": 500.0}


def record_samples(monkeypatch, exp) -> tuple[list[tuple[int, float, float, float]], object]:
    """Run the reference on ``exp``; every RTT sample as (flow, rtt ps, rate before, rate after)."""
    samples: list[tuple[int, float, float, float]] = []
    update = reference.Timely.update

    def recording(self, flow, rtt: float) -> None:
        before = flow.rate
        update(self, flow, rtt)
        samples.append((flow.id, rtt, before, flow.rate))

    monkeypatch.setattr(reference.Timely, "update", recording)
    return samples, simulate_reference(exp)


def timely_rates(rtts: list[float], line: float, t_low: float, t_high: float, min_rtt: float, delta: float,
                 beta: float = 0.8, alpha: float = 0.875, n_hai: int = 5, min_rate: float = 100e6
                 ) -> tuple[list[float], list[str]]:
    """Algorithm 1 of the paper on one flow's samples: the rate after each and which rule set it."""
    rate, prev, diff, calm = line, None, 0.0, 0
    rates, rules = [], []
    for rtt in rtts:
        if prev is None:   # the first sample has no difference: it only becomes prev_rtt
            prev = rtt
            rates.append(rate)
            rules.append("first")
            continue
        diff = (1 - alpha) * diff + alpha * (rtt - prev)
        prev = rtt
        g = diff / min_rtt
        calm = calm + 1 if g <= 0 else 0
        if rtt < t_low:
            rate, rule = rate + delta, "t_low"
        elif rtt > t_high:
            rate, rule = rate * (1 - beta * (1 - t_high / rtt)), "t_high"
        elif g <= 0:
            rate, rule = rate + (n_hai if calm >= n_hai else 1) * delta, "hai" if calm >= n_hai else "additive"
        else:
            rate, rule = rate * (1 - beta * g), "gradient"
        rate = min(line, max(min_rate, rate))
        rates.append(rate)
        rules.append(rule)
    return rates, rules


def test_a_lone_flows_first_sample_is_its_unloaded_rtt(monkeypatch) -> None:
    g = TaskGraphBuilder()
    g.flow(1, 0, 20_000)
    exp = sc.experiment(compiled(sc.star(2)), g, cc="timely")
    samples, ref = record_samples(monkeypatch, exp)
    assert ref.status == "done"
    # data: host NIC and switch (2 x (T + D)); its ACK back the same way (2 x (A_ACK + D))
    assert samples[0][1] == 2 * (T + D) + 2 * (A_ACK + D)
    assert all(rtt == samples[0][1] for _, rtt, _, _ in samples)   # nothing queues: every sample alike
    assert all(after == before == RATE for _, _, before, after in samples)   # at line rate already


def test_the_rate_follows_timelys_rule_sample_by_sample_on_an_incast(monkeypatch) -> None:
    """Two senders into one host of a star: the switch port to it is the single bottleneck."""
    exp = incast("timely", 400_000, n=2, timely=SMALL)
    samples, ref = record_samples(monkeypatch, exp)
    assert ref.status == "done"
    p = exp.params
    seen: set[str] = set()
    for f in sorted({s[0] for s in samples}):
        mine = [s for s in samples if s[0] == f]
        rates, rules = timely_rates([s[1] for s in mine], float(p.flow_line_bps[f]), SMALL["t_low_us"] * 1e6,
                                    SMALL["t_high_us"] * 1e6, SMALL["min_rtt_us"] * 1e6, SMALL["delta_mbps"] * 1e6)
        assert [s[3] for s in mine] == rates, f"flow {f}"
        assert [s[2] for s in mine[1:]] == rates[:-1], f"flow {f}: the rate changed between samples"
        seen.update(rules)
    assert seen >= {"first", "t_low", "t_high", "gradient", "additive", "hai"}, seen


def test_the_cpu_engine_matches_the_reference_on_the_incast() -> None:
    exp = incast("timely", 400_000, n=2, timely=SMALL)
    assert_matches_reference(run1("cpu", exp), exp)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(exp=experiments(), timely=st.fixed_dictionaries({
    "t_low_us": st.sampled_from([2.0, 4.5, 50.0]), "t_high_us": st.sampled_from([8.0, 12.0, 500.0]),
    "min_rtt_us": st.sampled_from([1.0, 4.0, 20.0]), "delta_mbps": st.sampled_from([10.0, 500.0]),
    "hai_after": st.sampled_from([1, 5])}))
def test_the_engine_matches_the_reference_on_random_experiments(backend, exp, timely) -> None:
    net = dataclasses.replace(exp.network, cc="timely", timely=dataclasses.replace(exp.network.timely, **timely))
    exp = dataclasses.replace(exp, network=net)
    assert_matches_reference(run1(backend, exp), exp)


@pytest.mark.parametrize("bad,field", [({"t_low_us": 600.0}, "t_high_us"), ({"beta": 1.5}, "beta"),
                                       ({"hai_after": 0}, "hai_after")])
def test_bad_timely_parameters_are_refused_with_the_field_named(bad: dict, field: str) -> None:
    from mvopt.config import load_config
    from mvopt.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"network\.timely\.{field}"):
        load_config({"network": {"cc": "timely", "timely": bad}})
