"""GEMM throughput by shape (mvopt/workload/gemm_shape.py) and its use in the compute model."""

import math

import pytest

from mvopt.config import ParallelismConfig
from mvopt.workload.compute import DEFAULT_EFFICIENCY, ComputeModel, Op, layer_ops
from mvopt.workload.gemm_shape import gemm_shape_table, shape_efficiency
from mvopt.workload.models import get_model
from mvopt.cluster.gpus import get_gpu

H100 = get_gpu("H100")
TOP = 780.19   # the table's 4096^3 entry (TFLOP/s)


def test_grid_points_are_the_published_values():
    t = gemm_shape_table(H100)
    # (m, n, k) -> TFLOP/s as printed in XLA's sm_90 table (b 1, bf16)
    for (m, n, k), tf in {(1024, 4096, 2048): 639.13, (2048, 2048, 1024): 498.02,
                          (256, 256, 256): 6.72, (4096, 256, 4096): 398.86, (4096, 4096, 4096): TOP}.items():
        assert t.throughput(m, n, k) == pytest.approx(tf, abs=1e-9)
    assert float(t.tflops.max()) == TOP


def test_interpolation_is_linear_in_log2_of_each_dimension():
    t = gemm_shape_table(H100)
    mid = math.sqrt(2048 * 4096)     # halfway between two grid values in log2
    assert t.throughput(1024, 4096, mid) == pytest.approx((639.13 + 751.92) / 2)
    quarter = 2048 * 2 ** 0.25
    assert t.throughput(quarter, 2048, 1024) == pytest.approx(0.75 * 498.02 + 0.25 * 604.58)
    # two dimensions between grid values: the bilinear mean of the four corners
    assert t.throughput(1024, mid, mid) == pytest.approx((529.46 + 639.13 + 665.68 + 751.92) / 4)


def test_dimensions_are_clamped_to_the_table():
    t = gemm_shape_table(H100)
    assert t.throughput(16384, 8192, 65536) == pytest.approx(TOP)
    assert t.throughput(8, 64, 100) == pytest.approx(6.72)
    assert t.throughput(1024, 201088, 2880) == pytest.approx(t.throughput(1024, 4096, 2880))


def test_efficiency_is_relative_to_the_largest_square_entry_and_at_most_one():
    assert shape_efficiency(H100, 4096, 4096, 4096) == 1.0
    assert shape_efficiency(H100, 1024, 4096, 2048) == pytest.approx(639.13 / TOP)
    t = gemm_shape_table(H100)
    for m in (300, 1000, 3000):
        for n in (256, 2880, 5000):
            for k in (700, 2880):
                assert 0 < t.efficiency(m, n, k) <= 1


def test_hopper_types_share_the_table_and_others_have_none():
    assert gemm_shape_table(get_gpu("H200")) is gemm_shape_table(H100)
    a100 = get_gpu("A100")
    assert gemm_shape_table(a100) is None
    assert shape_efficiency(a100, 256, 256, 256) == 1.0


def test_gemm_time_is_the_roofline_over_the_shape_efficiency():
    op = Op("fc", "fwd", "gemm", 2.0 * 1024 * 4096 * 2048, 0.0, shape=(1024, 4096, 2048))
    rate = H100.peak_bf16_flops * H100.matmul_efficiency * DEFAULT_EFFICIENCY.gemm_fraction
    assert ComputeModel(H100).op_time_s(op) == pytest.approx(op.flops / (rate * 639.13 / TOP))
    a100 = get_gpu("A100")
    a_rate = a100.peak_bf16_flops * a100.matmul_efficiency * DEFAULT_EFFICIENCY.gemm_fraction
    assert ComputeModel(a100).op_time_s(op) == pytest.approx(op.flops / a_rate)
    unshaped = Op("fc", "fwd", "gemm", op.flops, 0.0)
    assert ComputeModel(H100).op_time_s(unshaped) == pytest.approx(op.flops / rate)


def test_gemm_ops_carry_each_phase_shape_and_experts_split_rows():
    """GPT-OSS-120B at EP 8: 16 local experts, one GEMM per expert over its share of the rows;
    forward m x n x k, input gradient m x k x n, weight gradient k x n x m."""
    m = get_model("gpt-oss-120b").with_seq_len(4096)
    par = ParallelismConfig(pp=4, dp=16, ep=8, micro_batch=1, global_batch=512)
    ops = {(o.name, o.phase): o for o in layer_ops(m, par, flash_attention=True, moe=True, load=1.0)}
    rows = 4096 * 4 / 16        # tokens x top_k over the local experts
    h, w_in = 2880, 2 * 2880    # SwiGLU: FC1 is twice the expert width
    assert ops[("expert_fc1", "fwd")].shape == (rows, w_in, h)
    assert ops[("expert_fc1", "bwd_input")].shape == (rows, h, w_in)
    assert ops[("expert_fc1", "bwd_weight")].shape == (h, w_in, rows)
    assert ops[("expert_fc2", "fwd")].shape == (rows, h, 2880)
    q = 64 * 64 + 2 * 8 * 64
    assert ops[("qkv", "fwd")].shape == (4096, q, h)
    assert ops[("flash_attention", "fwd")].shape is None
    for o in ops.values():
        if o.kind == "gemm" and o.shape is not None:
            mm, nn, kk = o.shape
            weights = 128 / 8 if o.name.startswith("expert_") else 1
            assert o.flops == pytest.approx(2 * mm * nn * kk * weights)
