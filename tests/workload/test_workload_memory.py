"""Memory model: a hand-computed configuration, Korthikanti's formulas, published configurations."""

import random

import pytest

from mvopt.config import ParallelismConfig
from mvopt.errors import InfeasibleError
from mvopt.workload import (check_memory, decoder_model, inflight_layers, layer_activation_bytes,
                            memory_per_stage, peak_memory, published_runs)

GiB = 2**30


def test_hand_computed_configuration():
    # GPT style, 4 layers, h = 1024, a = 16, V = 51200, s = 1024; TP 2, DP 2, micro-batch 2,
    # no sequence parallelism, no recompute, 18 bytes per parameter, 2 GiB reserve.
    model = decoder_model("hand", layers=4, hidden=1024, heads=16, vocab=51200, seq_len=1024)
    par = ParallelismConfig(tp=2, dp=2, micro_batch=2, global_batch=8)
    [m] = memory_per_stage(model, par, "A100")
    per_layer = 12 * 1024**2 + 13 * 1024                 # 12h^2 + 13h
    replicated = 6 * 1024                                # row-parallel biases (2h) + two LayerNorms (4h)
    params = 4 * ((per_layer - replicated) // 2 + replicated) + 51200 * 1024 // 2 + 1024 * 1024 + 2 * 1024
    assert params == 52_469_760
    assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == 18 * params
    sbh = 1024 * 2 * 1024
    act_layer = sbh * (10 + 24 / 2 + 5 * 16 * 1024 / (1024 * 2))      # Korthikanti, TP only: 62 sbh
    assert m.activations_bytes == 4 * act_layer + sbh                 # + embedding dropout mask
    assert m.transient_bytes == 4 * sbh + 4 * 1024 * 2 * 51200 / 2    # output layer, fp32 logits
    assert m.total_bytes == 3_832_233_984
    assert m.fits


def test_distributed_optimizer_shards_only_optimizer_state():
    model = decoder_model("hand", layers=4, hidden=1024, heads=16, vocab=51200, seq_len=1024)
    plain = ParallelismConfig(tp=2, dp=4, global_batch=8)
    dist = ParallelismConfig(tp=2, dp=4, global_batch=8, distributed_optimizer=True)
    a, b = memory_per_stage(model, plain, "H100")[0], memory_per_stage(model, dist, "H100")[0]
    assert b.optimizer_bytes == pytest.approx(a.optimizer_bytes / 4)
    assert (b.weights_bytes, b.gradients_bytes) == (a.weights_bytes, a.gradients_bytes)
    mixed = memory_per_stage(model, plain, "H100", precision="mixed_adam")[0]
    assert mixed.weights_bytes + mixed.gradients_bytes + mixed.optimizer_bytes == \
        pytest.approx((a.weights_bytes + a.gradients_bytes + a.optimizer_bytes) * 16 / 18)


@pytest.mark.parametrize("seed", range(5))
def test_activation_formulas_reproduce_korthikanti_table_2(seed):
    rnd = random.Random(seed)
    t = rnd.choice([1, 2, 4, 8])
    a = rnd.choice([16, 32, 64])
    h, s, b = a * rnd.choice([64, 128]), rnd.choice([512, 2048, 4096]), rnd.choice([1, 2, 4])
    m = decoder_model("g", layers=2, hidden=h, heads=a, vocab=1024, seq_len=s)
    sbh = s * b * h

    def act(**kw):
        return layer_activation_bytes(m, ParallelismConfig(tp=t, micro_batch=b, global_batch=b, **kw))
    assert act() == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert act(sequence_parallel=True) == pytest.approx(sbh * (34 + 5 * a * s / h) / t)
    assert act(recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
    assert act(sequence_parallel=True, recompute="selective") == pytest.approx(34 * sbh / t)
    assert act(recompute="full") == pytest.approx(2 * sbh)
    if t == 1:
        assert act() == pytest.approx(sbh * (34 + 5 * a * s / h))


def test_flash_attention_drops_the_quadratic_term():
    m = decoder_model("g", layers=2, hidden=4096, heads=32, vocab=1024, seq_len=4096)
    par = ParallelismConfig(tp=2, micro_batch=1, global_batch=1)
    flash = layer_activation_bytes(m, par, flash_attention=True)
    selective = layer_activation_bytes(m, par, recompute="selective")
    assert flash == pytest.approx(selective + 4 * 32 * 4096 / 2)       # + fp32 log-sum-exp


@pytest.mark.parametrize("pp,v,m", [(8, 1, 64), (8, 3, 64), (4, 12, 8), (8, 1, 4)])
def test_first_stage_inflight_layers(pp, v, m):
    model = decoder_model("g", layers=96, hidden=64, heads=4, vocab=64, seq_len=16)
    par = ParallelismConfig(pp=pp, virtual_stages=v, global_batch=m)
    expected = 96 * min(m, pp) / pp if v == 1 else 96 * (1 + (pp - 1) / (pp * v))
    assert inflight_layers(model, par, 0) == pytest.approx(expected)
    assert inflight_layers(model, par, pp - 1) <= inflight_layers(model, par, 0)


def test_every_published_configuration_fits():
    for run in published_runs():
        peak = check_memory(run.model, run.parallel, run.gpu, precision=run.precision,
                            flash_attention=run.flash_attention)
        assert peak.fits, run.name


@pytest.mark.parametrize("name", ["korthikanti-22b", "korthikanti-175b"])
def test_korthikanti_configurations_without_recompute_do_not_fit(name):
    # Korthikanti et al., Figure 1 / Section 5: tensor parallelism alone (no sequence parallelism,
    # no recomputation) exceeds the 80 GB of an A100 for these models.
    run = next(r for r in published_runs() if r.name == name)
    d = {f: getattr(run.parallel, f) for f in run.parallel.__dataclass_fields__}
    baseline = ParallelismConfig(**{**d, "sequence_parallel": False, "recompute": "none"})
    assert not peak_memory(run.model, baseline, run.gpu).fits
    with pytest.raises(InfeasibleError, match=r"peak \d+\.\d GiB vs capacity 80\.0 GiB"):
        check_memory(run.model, baseline, run.gpu)
