"""Parallel layout: rejections with reasons, Megatron rank placement."""

import numpy as np
import pytest

from mvopt.config import ParallelismConfig
from mvopt.errors import InfeasibleError
from mvopt.workload import Layout, check_layout, get_model, layout_problems, published_runs

GPT = get_model("megatron-gpt3-175b")     # 96 layers, 96 heads


def problems(**kw):
    gpus = kw.pop("gpus", None)
    return layout_problems(GPT, ParallelismConfig(**kw), gpus_per_server=8, gpus=gpus)


def test_published_layouts_are_feasible():
    for run in published_runs():
        assert layout_problems(run.model, run.parallel, gpus_per_server=8, gpus=run.gpus) == [], run.name


@pytest.mark.parametrize("kw,needle", [
    (dict(tp=16, global_batch=16), "exceeds the 8 GPUs of a server"),
    (dict(tp=5, global_batch=5), "must divide gpus_per_server"),
    (dict(pp=5, global_batch=5), "divisible by pp * virtual_stages"),
    (dict(pp=4, virtual_stages=5, global_batch=8), "divisible by pp * virtual_stages"),
    (dict(pp=1, virtual_stages=2, global_batch=8), "needs pp >= 2"),
    (dict(dp=3, micro_batch=2, global_batch=8), "divisible by micro_batch * dp"),
    (dict(pp=4, virtual_stages=2, global_batch=6), "divisible by pp"),
    (dict(tp=2, pp=2, dp=2, global_batch=8, gpus=16), "must equal the 16 GPUs"),
])
def test_rejections_name_the_reason(kw, needle):
    found = problems(**kw)
    assert any(needle in p for p in found), found


def test_tp_must_divide_heads_and_check_raises_with_all_reasons():
    m = get_model({"layers": 6, "hidden": 768, "heads": 12, "vocab": 1000, "seq_len": 128})
    par = ParallelismConfig(tp=8, pp=4, global_batch=8)
    with pytest.raises(InfeasibleError) as e:
        check_layout(m, par, gpus_per_server=8)
    msg = str(e.value)
    assert "must divide the model's heads (12)" in msg and "layers (6)" in msg


def test_rank_coordinates_round_trip_and_megatron_order():
    lay = Layout(ParallelismConfig(tp=4, pp=3, dp=2, global_batch=6), gpus_per_server=8)
    for r in range(lay.world_size):
        c = lay.coords(r)
        assert lay.rank(*c) == r
    assert lay.coords(1) == (1, 0, 0)              # TP fastest
    assert lay.coords(4) == (0, 0, 1)              # then DP
    assert lay.coords(8) == (0, 1, 0)              # then PP
    assert lay.server(13) == 1 and lay.local_gpu(13) == 5
    with pytest.raises(IndexError):
        lay.coords(24)


def test_groups_partition_the_ranks_and_tp_stays_in_a_server():
    lay = Layout(ParallelismConfig(tp=4, pp=3, dp=2, global_batch=6), gpus_per_server=8)
    for groups, size in ((lay.tp_groups(), 4), (lay.dp_groups(), 2), (lay.pp_groups(), 3)):
        assert groups.shape[1] == size
        assert sorted(groups.ravel().tolist()) == list(range(24))
    servers = lay.servers_of(lay.tp_groups())
    assert np.all(servers == servers[:, :1])
    assert lay.dp_groups()[0].tolist() == [0, 4]
    assert lay.pp_groups()[0].tolist() == [0, 8, 16]
    for g in lay.tp_groups():
        assert len({lay.coords(int(r)).dp for r in g}) == 1 and len({lay.coords(int(r)).pp for r in g}) == 1


def test_sc21_rows_take_the_artifact_settings():
    # NVIDIA/Megatron-LM examples/sc21/run_table_1.sh and CONFIG.sh: MBS, DDP implementation,
    # --num-layers-per-virtual-pipeline-stage, --fp16 without fp32 gradient all-reduce
    want = {"megatron-sc21-t1-1.7b": (16, 1, "torch"), "megatron-sc21-t1-7.5b": (16, 1, "torch"),
            "megatron-sc21-t1-39.1b": (4, 1, "local"), "megatron-sc21-t1-145.6b": (2, 2, "local")}
    runs = {r.name: r for r in published_runs()}
    for name, (mbs, v, ddp) in want.items():
        run = runs[name]
        assert (run.parallel.micro_batch, run.parallel.virtual_stages, run.ddp) == (mbs, v, ddp), name
        assert run.precision == "mixed_adam" and run.parallel.recompute == "full", name
        assert any("run_table_1.sh" in a for a in run.assumptions), name
    for name in ("korthikanti-22b", "dgxc-gpt3-175b-bf16-128"):
        assert runs[name].precision == "bf16_fp32_grad"
