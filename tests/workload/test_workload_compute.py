"""Compute model: FLOPs against closed forms, roofline times, traces, overlap, calibration."""

import pytest

from mvopt.comm import default_model
from mvopt.config import ParallelismConfig
from mvopt.errors import InputFileError
from mvopt.workload import (CALIBRATION_ROWS, DEFAULT_EFFICIENCY, ComputeModel, Op, OperatorTrace,
                            calibrate_efficiency, get_model, iteration_flops, layer_ops, megatron_flops,
                            overlap_slowdown, overlapped_time_s)

GPT = get_model("korthikanti-22b")


def par(**kw):
    return ParallelismConfig(**{"micro_batch": 2, "global_batch": 8, **kw})


@pytest.mark.parametrize("tp,sp", [(1, False), (4, False), (8, True)])
def test_iteration_flops_equal_megatron_closed_form(tp, sp):
    no = par(tp=tp, sequence_parallel=sp)
    assert iteration_flops(GPT, no) == pytest.approx(megatron_flops(GPT, 8, recompute=False), rel=1e-12)
    full = par(tp=tp, sequence_parallel=sp, recompute="full")
    assert iteration_flops(GPT, full) == pytest.approx(megatron_flops(GPT, 8, recompute=True), rel=1e-12)


def test_selective_recompute_adds_the_attention_core_once():
    extra = iteration_flops(GPT, par(recompute="selective")) - iteration_flops(GPT, par())
    s, h, l = GPT.seq_len, GPT.hidden, GPT.layers
    assert extra == pytest.approx(4 * 8 * s * s * h * l)


def test_flash_attention_keeps_model_flops():
    assert iteration_flops(GPT, par(), flash_attention=True) == pytest.approx(iteration_flops(GPT, par()))


def test_gqa_swiglu_forward_flops_by_hand():
    m = get_model("llama-3.1-8b")
    p = ParallelismConfig(tp=2, micro_batch=1, global_batch=1)
    fwd = sum(o.flops for o in layer_ops(m, p) if o.phase == "fwd" and o.kind != "memory")
    t, h, kv, f, s = 8192, 4096, 1024, 14336, 8192
    expected = 2 * t * h * (h + 2 * kv) + 4 * t * s * h + 2 * t * h * h + 2 * t * h * 2 * f + 2 * t * f * h
    assert fwd * 2 == pytest.approx(expected)


def test_roofline_time_of_a_gemm_and_of_a_memory_kernel():
    cm = ComputeModel("A100")
    e, g = DEFAULT_EFFICIENCY, cm.gpu
    gemm = Op("x", "fwd", "gemm", 1e12, 1e6)
    assert cm.op_time_s(gemm) == pytest.approx(1e12 / (312e12 * 0.859 * e.gemm_fraction))
    mem = Op("y", "fwd", "memory", 0.0, 1e9)
    assert cm.op_time_s(mem) == pytest.approx(1e9 / (g.hbm_bytes_per_s * e.memory_fraction))
    assert ComputeModel("H100").op_time_s(gemm) < cm.op_time_s(gemm)


def test_trace_replaces_the_model_for_the_operators_it_lists():
    trace = OperatorTrace.parse("op,phase,time_us\nqkv,fwd,100\nfc1,bwd_weight,250.5\n")
    cm = ComputeModel("H100", trace=trace)
    ops = layer_ops(GPT, par(tp=8))
    qkv = next(o for o in ops if o.name == "qkv" and o.phase == "fwd")
    fc2 = next(o for o in ops if o.name == "fc2" and o.phase == "fwd")
    assert cm.op_time_s(qkv) == pytest.approx(100e-6)
    assert cm.op_time_s(fc2) == ComputeModel("H100").op_time_s(fc2)


@pytest.mark.parametrize("text,needle", [
    ("name,time\nqkv,3\n", "header"),
    ("op,phase,time_us\nqkv,sideways,3\n", "phase must be one of"),
    ("op,phase,time_us\nqkv,fwd,fast\n", "number"),
    ("op,phase,time_us\nqkv,fwd\n", "3 fields"),
])
def test_foreign_traces_are_rejected(text, needle):
    with pytest.raises(InputFileError, match=needle):
        OperatorTrace.parse(text, "t.csv")


def test_overlap():
    assert overlap_slowdown("A100") == pytest.approx(108 / 92)
    assert overlap_slowdown("H100") == pytest.approx(132 / 116)
    assert overlapped_time_s(10.0, 0.0, 1.2) == 10.0
    assert overlapped_time_s(1.0, 10.0, 1.2) == 10.0                   # communication-bound
    assert overlapped_time_s(10.0, 6.0, 1.2) == pytest.approx(11.0)    # 6 s at 1/1.2 speed, 5 s more


def test_calibration_reproduces_the_pinned_defaults():
    assert CALIBRATION_ROWS == ("korthikanti-22b",)
    fitted = calibrate_efficiency(default_model())
    assert fitted.gemm_fraction == pytest.approx(DEFAULT_EFFICIENCY.gemm_fraction, abs=0.002)
    assert fitted.memory_fraction == pytest.approx(DEFAULT_EFFICIENCY.memory_fraction, abs=0.002)
