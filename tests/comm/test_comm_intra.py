"""Intra-server model: fit quality in and out of sample, derivation rules, files, the calibrate command."""

import argparse
import math

import numpy as np
import pytest

from mvopt.comm import (IntraServerModel, bus_factor, default_model, dump_params, fit_curve,
                        load_params, published_sweeps)
from mvopt.comm.intra import fit_published
from mvopt.commands import calibrate
from mvopt.errors import ConfigError, InputFileError

from nccl_logs import NEW_FORMAT

MiB = 2**20


def rel_err(pred, measured):
    return np.abs(np.asarray(pred) / np.asarray(measured) - 1.0)


def test_fit_recovers_an_alpha_beta_law_exactly():
    sizes = 2.0 ** np.arange(10, 31)
    times = 25e-6 + sizes / 150e9
    curve = fit_curve(sizes, times, gpu="A100", collective="all_reduce", gpus=8)
    mid = 3 * 2.0 ** np.arange(10, 30)            # between the fitted sizes
    assert rel_err(curve.time_s(mid), 25e-6 + mid / 150e9).max() < 0.005
    assert rel_err(curve.time_s(sizes), times).max() < 0.005


def test_held_out_sizes_median_error_below_two_percent():
    # Fit every other size of each published sweep; predict the others (>= 1 MiB).
    errs = []
    for sw in published_sweeps():
        train = np.arange(len(sw.sizes_bytes)) % 2 == 0
        curve = fit_curve(sw.sizes_bytes[train], sw.times_s[train], gpu=sw.gpu, collective=sw.collective,
                          gpus=sw.gpus)
        test = ~train & (sw.sizes_bytes >= MiB)
        e = rel_err(curve.time_s(sw.sizes_bytes[test]), sw.times_s[test])
        assert np.median(e) < 0.03, sw.name
        errs.append(e)
    assert np.median(np.concatenate(errs)) <= 0.02


def test_shipped_defaults_fit_the_sweeps_and_are_reproducible():
    model = default_model()
    for sw in published_sweeps():
        big = sw.sizes_bytes >= MiB
        e = rel_err(model.time_s(sw.collective, sw.sizes_bytes[big], gpu=sw.gpu, gpus=sw.gpus), sw.times_s[big])
        assert np.median(e) < 0.01 and e.max() < 0.06, sw.name
    refit = IntraServerModel(fit_published())
    s = 2.0 ** np.arange(10, 34)
    for gpu in ("A100", "H100", "H200"):
        assert rel_err(refit.time_s("all_reduce", s, gpu=gpu, gpus=8),
                       model.time_s("all_reduce", s, gpu=gpu, gpus=8)).max() < 1e-3


def test_time_is_non_decreasing_and_bandwidth_bound_beyond_the_sweep():
    m = default_model()
    s = 2.0 ** np.arange(0, 40, 0.25)
    for gpu in ("A100", "H100", "H200"):
        t = m.time_s("all_reduce", s, gpu=gpu, gpus=8)
        assert np.all(np.diff(t) >= 0)
        busbw = 2**36 * bus_factor("all_reduce", 8) / m.time_s("all_reduce", 2**36, gpu=gpu, gpus=8)
        assert busbw < 500e9                      # NVLS peak of H100/H200 is ~480 GB/s


def test_derived_collectives_algorithms_and_gpu_counts():
    m = default_model()
    s = np.array([MiB, 64 * MiB, 2**30])
    ring = m.time_s("all_reduce", s, gpu="H100", gpus=8, algorithm="ring")
    auto = m.time_s("all_reduce", s, gpu="H100", gpus=8)
    assert np.all(ring >= auto) and ring[-1] > auto[-1]
    ceiling = s[-1] * bus_factor("all_reduce", 8) / ring[-1]
    assert ceiling <= 370e9 * (1 + 1e-9)                                 # nccl_facts ring ceiling
    assert m.time_s("all_gather", s, gpu="H100", gpus=8) == pytest.approx(0.5 * ring)
    assert m.time_s("reduce_scatter", s, gpu="A100", gpus=8) == \
        pytest.approx(0.5 * m.time_s("all_reduce", s, gpu="A100", gpus=8))
    # Another GPU count: same bus bytes on the 8-GPU curve.
    four = m.time_s("all_reduce", s, gpu="A100", gpus=4)
    assert four == pytest.approx(m.time_s("all_reduce", s * (1.5 / 1.75), gpu="A100", gpus=8))
    assert m.time_s("all_reduce", s, gpu="A100", gpus=1).tolist() == [0.0, 0.0, 0.0]
    assert m.time_s("send_recv", MiB, gpu="A100", gpus=2) > 0
    with pytest.raises(ConfigError, match="nvls"):
        m.time_s("all_reduce", MiB, gpu="A100", gpus=8, algorithm="nvls")


def test_uncalibrated_gpu_transfers_from_the_nearest_nvlink():
    m = default_model()
    fast = {"name": "X", "bf16_tflops": 2000, "hbm_GB": 192, "hbm_TBps": 8,
            "nvlink_GBps_per_direction": 900, "nvls": True}
    big = 2**32
    assert m.time_s("all_reduce", big, gpu=fast, gpus=8) == pytest.approx(
        m.time_s("all_reduce", 0.0, gpu="H100", gpus=8)
        + (m.time_s("all_reduce", big, gpu="H100", gpus=8) - m.time_s("all_reduce", 0.0, gpu="H100", gpus=8)) / 2)
    # Leave H200 out: it takes the H100 curve (same NVLink, NVLS).
    no_h200 = IntraServerModel([c for c in m.curves if not c.gpu.startswith("H200")])
    assert no_h200.time_s("all_reduce", big, gpu="H200", gpus=8) == m.time_s("all_reduce", big, gpu="H100", gpus=8)


def test_parameter_file_round_trip_and_errors(tmp_path):
    f = tmp_path / "p.yaml"
    dump_params(default_model().curves, f)
    again = load_params(f)
    s = 2.0 ** np.arange(0, 36, 0.5)
    for a, b in zip(again, default_model().curves):
        assert (a.gpu, a.collective, a.gpus, a.algorithm, a.source) == (b.gpu, b.collective, b.gpus, b.algorithm,
                                                                        b.source)
        assert a.time_s(s) == pytest.approx(b.time_s(s), rel=1e-12)
    (tmp_path / "bad.yaml").write_text("version: 2\n")
    with pytest.raises(ConfigError, match="intra-server parameter file"):
        load_params(tmp_path / "bad.yaml")
    with pytest.raises(InputFileError):
        load_params(tmp_path / "missing.yaml")


def run_calibrate(argv):
    p = argparse.ArgumentParser()
    calibrate.add_arguments(p)
    return calibrate.run(p.parse_args(argv))


def test_calibrate_command_fits_a_log_and_prints_errors(tmp_path, capsys):
    log = tmp_path / "ar.log"
    log.write_text(NEW_FORMAT)
    out = tmp_path / "params.yaml"
    assert run_calibrate([str(log), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "A100-SXM4-80GB all_reduce x8" in text and "median |error|" in text and "1 GiB" in text
    [curve] = load_params(out)
    assert (curve.gpu, curve.gpus, curve.collective) == ("A100-SXM4-80GB", 8, "all_reduce")
    assert math.isclose(curve.time_s(2**30), 9330.99e-6, rel_tol=0.01)


def test_calibrate_command_rejects_foreign_input(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    with pytest.raises(InputFileError, match="not an nccl-tests log"):
        run_calibrate([str(bad)])
    with pytest.raises(ConfigError):
        run_calibrate([])
    old = tmp_path / "old.log"
    old.write_text(NEW_FORMAT.replace("NVIDIA A100-SXM4-80GB", "NVIDIA Tesla V100"))
    with pytest.raises(InputFileError, match="--gpu"):
        run_calibrate([str(old)])


def test_ring_and_auto_are_interchangeable_without_nvls():
    m = default_model()
    a100 = next(c for c in m.curves if c.gpu.startswith("A100"))
    ring_only = IntraServerModel([c for c in m.curves if c is not a100] + [
        type(a100)(a100.gpu, a100.collective, a100.gpus, "ring", a100.regimes, a100.source, a100.size_range)])
    s = np.array([MiB, 2**30])
    assert ring_only.time_s("all_reduce", s, gpu="A100", gpus=8) == pytest.approx(
        m.time_s("all_reduce", s, gpu="A100", gpus=8))
    assert ring_only.time_s("all_reduce", s, gpu="A100", gpus=4) == pytest.approx(
        m.time_s("all_reduce", s, gpu="A100", gpus=4))
