"""The busiest expert-parallel rank's routed tokens: the closed form against the expected maximum
of normals and against routing drawn at random."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.config import ParallelismConfig
from mvopt.workload import decoder_model
from mvopt.workload.routing import busiest_load, expected_max_normal, sampled_max_load


def _model(experts: int, top_k: int, seq: int):
    return decoder_model("r", layers=2, hidden=64, heads=4, ffn=64, vocab=64, seq_len=seq, swiglu=True,
                         experts=experts, top_k=top_k, expert_ffn=32)


def test_expected_max_normal_known_values():
    # n = 2: 1/sqrt(pi); n = 3: 3/(2 sqrt(pi)); n = 8: 1.4236 (tables of normal order statistics)
    assert expected_max_normal(1) == pytest.approx(0.0, abs=1e-12)
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-9)
    assert expected_max_normal(3) == pytest.approx(1.5 / np.sqrt(np.pi), rel=1e-9)
    assert expected_max_normal(8) == pytest.approx(1.4236, abs=1e-4)


@pytest.mark.parametrize("experts,ep,k,seq", [(8, 8, 2, 512), (8, 4, 2, 256), (16, 4, 4, 128)])
def test_sampled_max_load_matches_random_routing(experts, ep, k, seq):
    """Each of ep x seq tokens picks k distinct experts uniformly; the largest rank count over
    its mean, averaged over 400 draws, agrees with the closed form within 4 standard errors."""
    rng = np.random.default_rng(7)
    maxima = []
    for _ in range(400):
        picks = np.argsort(rng.random((ep * seq, experts)), axis=1)[:, :k]
        counts = np.bincount((picks // (experts // ep)).ravel(), minlength=ep)
        maxima.append(counts.max() / (seq * k))
    par = ParallelismConfig(dp=ep, ep=ep, global_batch=ep)
    got = sampled_max_load(_model(experts, k, seq), par)
    assert got > 1.0
    assert abs(got - np.mean(maxima)) < 4 * np.std(maxima) / np.sqrt(len(maxima))


def test_busiest_load_closed_form_and_limits():
    model = _model(8, 2, 4096)
    par = ParallelismConfig(dp=16, ep=8, global_batch=16)
    # Mixtral-like: N = 8 x 4096 tokens, v = 2 (1/8)(7/8)(6/7) = 0.1875
    sd = np.sqrt(8 * 4096 * 0.1875 * 8 / 7)
    assert sampled_max_load(model, par) == pytest.approx(1 + sd * expected_max_normal(8) / 8192, rel=1e-12)
    assert busiest_load(model, par, 2.0) == pytest.approx(2.0 * sampled_max_load(model, par), rel=1e-12)
    assert busiest_load(model, par, 8.0) == 8.0                       # every routed token
    assert busiest_load(model, ParallelismConfig(dp=16, global_batch=16), 3.0) == 1.0   # no EP
