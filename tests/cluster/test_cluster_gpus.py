"""GPU table: published specs, name lookup, user-defined GPUs."""

import pytest

from mvopt.cluster.gpus import builtin_gpus, get_gpu, gpu_from_dict, load_published
from mvopt.errors import ConfigError


def test_builtin_specs_come_from_published_yaml():
    published = load_published()["gpus"]
    assert set(builtin_gpus()) == set(published)
    for name, spec in builtin_gpus().items():
        p = published[name]
        assert spec.peak_bf16_flops == p["bf16_tflops"] * 1e12
        assert spec.hbm_bytes == p["hbm_GB"] * 2**30
        assert spec.hbm_bytes_per_s == pytest.approx(p["hbm_TBps"] * 1e12)
        assert spec.nvlink_bytes_per_s == p["nvlink_GBps_per_direction"] * 1e9


@pytest.mark.parametrize("alias,name", [
    ("A100", "A100-SXM4-80GB"), ("h100", "H100-SXM5-80GB"), ("H200", "H200-SXM-141GB"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), ("H200-SXM-141GB", "H200-SXM-141GB"),
])
def test_lookup_by_any_name(alias, name):
    assert get_gpu(alias).name == name


def test_h200_inherits_h100_matmul_efficiency_and_only_hopper_has_nvls():
    assert get_gpu("H200").max_matmul_efficiency == get_gpu("H100").max_matmul_efficiency
    assert get_gpu("H100").nvls and get_gpu("H200").nvls and not get_gpu("A100").nvls


def test_user_defined_gpu():
    spec = {"bf16_tflops": 2250, "hbm_GB": 192, "hbm_TBps": 8, "nvlink_GBps_per_direction": 900}
    g = get_gpu("B200x", user_gpus={"B200x": spec})
    assert g.peak_bf16_flops == 2.25e15 and g.hbm_bytes == 192 * 2**30 and g.matmul_efficiency == 1.0
    assert get_gpu({"name": "B200x", **spec}) == g


def test_bad_gpus_are_rejected():
    with pytest.raises(ConfigError, match="known GPU"):
        get_gpu("V100")
    with pytest.raises(ConfigError, match="hbm_TBps"):
        gpu_from_dict("x", {"bf16_tflops": 1, "hbm_GB": 1, "nvlink_GBps_per_direction": 1})
    with pytest.raises(ConfigError, match="unknown GPU field"):
        gpu_from_dict("x", {"bf16_tflops": 1, "hbm_GB": 1, "hbm_TBps": 1, "nvlink_GBps_per_direction": 1,
                            "colour": "green"})
