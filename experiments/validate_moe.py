"""Mixture-of-experts validation: published MoE training throughputs and nccl-tests all-to-all
measurements (experiments/moe_published.yaml) simulated by mvopt, the errors written to the
``moe`` section of docs/validation.md.

    python experiments/validate_moe.py             # simulate, write docs/validation.md
    python experiments/validate_moe.py --no-write  # print only

End-to-end rows run at packet level on the CPU backend (workload kind ``training``), on the row's
servers in a 2-tier rail-optimised fabric (one rail group: every server's NIC i on rail leaf i,
non-blocking), the row's NIC rate, 2 us per link and InfiniBand-like lossless settings (no
congestion control, PFC, 32,000-byte packets), as experiments/validate_end_to_end.py models its
clusters; the flow-level time (``simulation.fidelity: flow``) of the same configuration is shown
beside it. Every row runs twice: at the NIC's line rate, and with ``cluster.nic_efficiency`` from
the row's calibration row (section ``nic_efficiency`` of the data: published figures of the same
platform that are neither all-to-alls nor MoE throughputs, :func:`calibrated_efficiency`). The measured iteration time of a row given as model TFLOP/s per GPU is its source's
FLOP count (Megatron-LM's formula, stated in the row) over GPUs x TFLOP/s; one given as tokens/s per GPU
is global batch x sequence over GPUs x tokens/s. All-to-all rows run
nccl-tests' even all-to-all (``collective`` workload, ``op: all_to_all``) over the row's GPUs
(:func:`alltoall_config`).
The settings of each row were fixed from its sources (the row's ``assumed`` list) before it was
simulated; nothing was tuned on the validation rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402

from mvopt.config import load_config  # noqa: E402

DATA = ROOT / "experiments" / "moe_published.yaml"
DOC = ROOT / "docs" / "validation.md"
DELAY_NS = 2000.0
PAYLOAD = 32_000
TARGET_E2E, TARGET_A2A = 10.0, 5.0
A2A_ALGORITHMS = ("concurrent", "pairwise")


def megatron_flops(m: dict, global_batch: int) -> float:
    """Megatron-LM's num_floating_point_operations (MoE form, no shared experts)."""
    b, s, l, h = global_batch, m["seq"], m["layers"], m["hidden"]
    qratio = m["kv_channels"] * m["heads"] / h
    glu = 1.5 if m["swiglu"] else 1.0
    return 12.0 * b * s * l * h * h * ((1 + m["query_groups"] / m["heads"] + s / h) * qratio
                                       + m["ffn"] / h * m["top_k"] * glu + m["padded_vocab"] / (2 * l * h))


def measured_time_s(row: dict) -> float:
    """Iteration time of a row: stated, from tokens/s per GPU (global batch x sequence over GPUs x
    tokens/s), or from model TFLOP/s per GPU with the row's Megatron-LM FLOP count."""
    meas = row["measured"]
    if "t_iter_s" in meas:
        return float(meas["t_iter_s"])
    if "tokens_per_s_per_gpu" in meas:
        tokens = row["parallel"]["global_batch"] * row["model"]["seq"]
        return tokens / (row["gpus"] * meas["tokens_per_s_per_gpu"])
    flops = megatron_flops(row["model"], row["parallel"]["global_batch"])
    return flops / (row["gpus"] * meas["tflops_per_gpu"] * 1e12)


def calibrated_efficiency(cal: dict) -> float:
    """``cluster.nic_efficiency`` of a calibration row: :func:`mvopt.comm.nic_efficiency.nic_efficiency`
    of its bus bandwidth, or the midpoint of a stated per-NIC range over the line rate."""
    from mvopt.comm.nic_efficiency import nic_efficiency, per_nic_efficiency

    if "per_nic_GBps" in cal:
        return per_nic_efficiency(statistics.mean(cal["per_nic_GBps"]), cal["nic_gbps"])
    return nic_efficiency(cal["collective"], cal["busbw_GBps"], cal["nic_gbps"], cal["nics_per_server"])


def efficiencies(data: dict) -> dict[str, float]:
    return {c["name"]: calibrated_efficiency(c) for c in data.get("nic_efficiency", [])}


def _cluster_eff(cluster: dict, eff: float | None) -> dict:
    return {**cluster, "nic_efficiency": eff} if eff is not None else cluster


def training_config(row: dict, fidelity: str, eff: float | None = None):
    servers = row["gpus"] // 8
    par = dict(row["parallel"])
    par["dp"] = row["gpus"] // (par["tp"] * par["pp"])
    par.update(distributed_optimizer=True, overlap_grad_reduce=True, overlap_param_gather=True)
    return load_config({
        "name": row["name"],
        "cluster": _cluster_eff({"topology": "rail_optimized", "servers": servers, "servers_per_group": servers,
                                 "gpus_per_server": 8, "gpu": row["gpu"],
                                 "link_gbps": [row["nic_gbps"], row["nic_gbps"]],
                                 "link_delay_ns": [DELAY_NS, DELAY_NS]}, eff),
        "network": {"cc": "none", "payload_bytes": PAYLOAD, "pfc": {"headroom_bdp": 4}},
        "workload": {"kind": "training", "model": row["model"]["zoo"], "seq_len": row["model"]["seq"],
                     "flash_attention": True, "precision": row.get("precision", "bf16_fp32_grad"),
                     "expert_skew": 1.0},
        "parallelism": par,
        "simulation": {"fidelity": fidelity},
    })


def alltoall_config(row: dict, size_bytes: int, algorithm: str, eff: float | None = None):
    """nccl-tests' all-to-all over every GPU of the row's servers: one NIC per GPU at the row's
    rate on one non-blocking leaf (the only switch two servers need), NVLink inside a server
    (the intra-server model), the all-to-all ``algorithm`` (``concurrent``: NCCL's group of
    sends and receives to every peer at once; ``pairwise``: in NCCL's peer order, rank i sending
    to rank i + r in round r), lossless without congestion control, 32,000-byte packets."""
    servers, gps = row["servers"], row["gpus_per_server"]
    nics = gps if servers > 1 else 1
    return load_config({
        "name": row["name"],
        "cluster": _cluster_eff({"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": max(2, servers * nics),
                                 "gpus_per_server": gps, "nics_per_server": nics, "gpu": row["gpu"],
                                 "link_gbps": [row["nic_gbps"], row["nic_gbps"]],
                                 "link_delay_ns": [DELAY_NS, DELAY_NS]}, eff),
        "network": {"cc": "none", "payload_bytes": PAYLOAD, "pfc": {"headroom_bdp": 4}},
        "workload": {"kind": "collective"},
        "collective": {"op": "all_to_all", "bytes": int(size_bytes), "all_to_all": algorithm,
                       "hierarchical": True, "hosts": list(range(servers * nics))},
    })


def run_one(cfg) -> tuple[object, float]:
    from mvopt.build import build, simulate_built

    t0 = time.perf_counter()
    b = build(cfg)
    r, = simulate_built([b], backend="cpu")
    return (b, r), time.perf_counter() - t0


# (key in the result, fidelity, calibrated efficiency?) of every end-to-end run
E2E_RUNS = (("line", "packet", False), ("packet", "packet", True), ("flow", "flow", True))
# (key, algorithm, calibrated efficiency?) of every all-to-all run
A2A_RUNS = (("line", "concurrent", False), ("concurrent", "concurrent", True), ("pairwise", "pairwise", True))


def end_to_end(rows: list[dict], effs: dict[str, float]) -> list[dict]:
    from mvopt.build import training_report

    out, memo = [], {}
    for row in rows:
        eff = effs[row["nic_efficiency"]] if "nic_efficiency" in row else None
        res = {"row": row, "measured_s": measured_time_s(row), "eff": eff}
        for key, fid, calibrated in E2E_RUNS:
            e = eff if calibrated else None
            # rows that differ only in what was measured (software versions of one job) simulate once
            same = yaml.safe_dump([row["model"], row["gpu"], row["gpus"], row["nic_gbps"], row["parallel"],
                                   row.get("precision"), fid, e])
            if same not in memo:
                (b, r), wall = run_one(training_config(row, fid, e))
                if r.status != "done":
                    raise SystemExit(f"{row['name']} ({fid}): {r.status} {r.diagnostic}")
                rep = training_report(b.plan, r)
                memo[same] = {"t_s": rep["iteration_time_s"], "wall_s": wall, "breakdown": rep["breakdown"]}
            res[key] = memo[same]
            print(f"{row['name']} {key}: {res[key]['t_s']:.3f} s (measured {res['measured_s']:.3f} s), "
                  f"{res[key]['wall_s']:.1f} s", flush=True)
        out.append(res)
    return out


def all_to_all(rows: list[dict], effs: dict[str, float]) -> list[dict]:
    out = []
    for row in rows:
        n = row["servers"] * row["gpus_per_server"]
        eff = effs[row["nic_efficiency"]] if "nic_efficiency" in row else None
        for pt in row["points"]:
            res = {"row": row, "point": pt, "gpus": n, "eff": eff}
            for key, algo, calibrated in A2A_RUNS:
                (b, r), wall = run_one(alltoall_config(row, pt["size_bytes"], algo, eff if calibrated else None))
                if r.status != "done":
                    raise SystemExit(f"{row['name']}: {r.status} {r.diagnostic}")
                res[key] = pt["size_bytes"] / r.makespan_s * (n - 1) / n / 1e9
                print(f"{row['name']} {pt['size_bytes']} {key}: busbw {res[key]:.2f} GB/s (measured "
                      f"{pt['busbw_GBps']}), {wall:.1f} s", flush=True)
            out.append(res)
    return out


def err(sim: float, meas: float) -> float:
    return (sim / meas - 1) * 100


def _median_line(what: str, errs: list[float], target: float) -> str:
    med = statistics.median(errs)
    return (f"- {what}: median |error| over {len(errs)} {'rows' if target == TARGET_E2E else 'points'} "
            f"{med:.1f} % (target {target:.0f} %: {'met' if med <= target else 'missed'}).")


def render(e2e: list[dict], a2a: list[dict], data: dict, command: str) -> str:
    effs = efficiencies(data)
    lines = ["## Mixture of experts: published throughputs and all-to-all", "",
             "Data: `experiments/moe_published.yaml` (each row's source, commit and quotation, and the "
             "settings assumed where the source is silent). End-to-end rows: packet level on the CPU "
             "backend, the row's servers on a 2-tier rail-optimised fabric at the row's NIC rate, 2 us "
             "links, no congestion control with PFC, 32,000-byte packets; the flow-level time of the same "
             "configuration beside it. Errors are `simulated / measured - 1`; targets: median within "
             f"{TARGET_E2E:.0f} % end to end, {TARGET_A2A:.0f} % for all-to-all sizes >= 1 MiB.", "",
             "**Calibration rows are not validation rows.** `cluster.nic_efficiency` (the fraction of the "
             "NIC line rate NCCL reaches between servers) comes from the data's `nic_efficiency` rows, "
             "published figures of the same platform that are neither all-to-alls nor MoE throughputs: "
             "per-NIC bus bandwidth of a ring between two servers over the line rate. Every validation row "
             "runs at line rate and with its platform's efficiency; the headline is the calibrated run "
             "(`concurrent` for the all-to-all: NCCL's group of sends and receives to every peer, which "
             "NCCL spreads over its point-to-point channels so that the peers proceed at once). Nothing "
             "was tuned on the validation rows.", "",
             "| calibration row | collective | NIC Gb/s | published | nic_efficiency |", "|---|---|---|---|---|"]
    for c in data.get("nic_efficiency", []):
        pub = (f"{c['per_nic_GBps'][0]:g}-{c['per_nic_GBps'][1]:g} GB/s per NIC (stated)" if "per_nic_GBps" in c
               else f"busbw {c['busbw_GBps']:.2f} GB/s, {c['nics_per_server']} NIC(s) per server")
        lines.append(f"| {c['name']} | {c['collective']} | {c['nic_gbps']:g} | {pub} | {effs[c['name']]:.4f} |")
    lines += ["", provenance(command), "", "### End-to-end iteration time", "",
              "| row | GPUs | TP/PP/VP/EP, MBS, GBS | measured s | line rate: packet s | error | "
              "nic_efficiency | packet s | error | flow s | error | run s (packet) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errs: dict[str, list[float]] = {"line": [], "packet": [], "flow": []}
    for r in e2e:
        row, p = r["row"], r["row"]["parallel"]
        e = {k: err(r[k]["t_s"], r["measured_s"]) for k in errs}
        for k in errs:
            errs[k].append(abs(e[k]))
        lines.append(f"| {row['name']} | {row['gpus']} | {p['tp']}/{p['pp']}/{p['virtual_stages']}/{p['ep']}, "
                     f"{p['micro_batch']}, {p['global_batch']} | {r['measured_s']:.3f} | {r['line']['t_s']:.3f} | "
                     f"{e['line']:+.1f} % | {r['eff'] if r['eff'] is not None else 1:.4f} | {r['packet']['t_s']:.3f} | "
                     f"{e['packet']:+.1f} % | {r['flow']['t_s']:.3f} | {e['flow']:+.1f} % | {r['packet']['wall_s']:.0f} |")
    if e2e:
        lines += ["", _median_line("packet level, calibrated (headline)", errs["packet"], TARGET_E2E),
                  _median_line("packet level, line rate", errs["line"], TARGET_E2E),
                  _median_line("flow level, calibrated", errs["flow"], TARGET_E2E), "",
                  "The network is not what these rows miss: running the NICs at the calibrated fraction "
                  "instead of line rate moves the iteration by "
                  + ", ".join(f"{(r['packet']['t_s'] / r['line']['t_s'] - 1) * 100:+.1f} %" for r in e2e)
                  + " (packet level). The measured times come from the published tokens/s per GPU (global "
                  "batch x sequence / (GPUs x tokens/s)) or, for rows given in TFLOP/s, from Megatron-LM's FLOP "
                  "formula. Rows beyond the target: "
                  + (", ".join(f"`{r['row']['name']}` {err(r['packet']['t_s'], r['measured_s']):+.1f} %" for r in e2e
                               if abs(err(r["packet"]["t_s"], r["measured_s"])) > TARGET_E2E) or "none")
                  + ". The MoE layer's compute includes Megatron-Core's token permutation, the busiest EP "
                  "rank's sampling maximum (docs/training-model.md, *Mixture of experts*) and, on Hopper, each "
                  "GEMM's rate at its shape from XLA's published H100 GEMM table (per expert for grouped GEMMs; "
                  "*Compute*); decisions/0102 and 0104 list what it still leaves out.", ""]
        lines += _jobs(e2e)
    lines += ["", "Published MoE throughputs not simulated:", ""]
    for row in data.get("not_simulated", []):
        lines.append(f"- `{row['name']}`: {' '.join(row['why'].split())}")
    lines += ["", "### All-to-all (nccl-tests `alltoall_perf`)", "",
              "One NIC per GPU at the row's rate on one non-blocking leaf, NVLink inside a server (the "
              "intra-server model), no congestion control with PFC, 32,000-byte packets. Runs: "
              "`concurrent` at line rate; `concurrent` and `pairwise` (the same group on one "
              "point-to-point channel: each rank sends to one peer at a time in NCCL's round order) with "
              "the row's `nic_efficiency` (rows inside one server use no NIC).", "",
              "| row | GPU | servers x GPUs | NIC Gb/s | size | measured busbw GB/s | line rate | error | "
              "nic_efficiency | concurrent | error | pairwise | error |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    a_errs: dict[str, list[float]] = {k: [] for k, _, _ in A2A_RUNS}
    for r in a2a:
        row, pt = r["row"], r["point"]
        cells = []
        for key, _, _ in A2A_RUNS:
            e = err(r[key], pt["busbw_GBps"])
            if pt["size_bytes"] >= 2**20:
                a_errs[key].append(abs(e))
            cells += [f"{r[key]:.2f}", f"{e:+.1f} %"]
        cells.insert(2, f"{r['eff']:.4f}" if r["eff"] is not None else "-")
        lines.append(f"| {row['name']} | {row['gpu']} | {row['servers']} x {row['gpus_per_server']} | "
                     f"{row['nic_gbps']:g} | {pt['size_bytes'] / 2**20:.0f} MiB | {pt['busbw_GBps']:.2f} "
                     f"({pt['placement']}) | " + " | ".join(cells) + " |")
    if a2a:
        lines += ["", _median_line("`concurrent`, calibrated (headline), sizes >= 1 MiB", a_errs["concurrent"], TARGET_A2A),
                  _median_line("`concurrent`, line rate, sizes >= 1 MiB", a_errs["line"], TARGET_A2A),
                  _median_line("`pairwise`, calibrated, sizes >= 1 MiB", a_errs["pairwise"], TARGET_A2A)]
        cross = [r for r in a2a if r["row"]["servers"] > 1]
        if cross:
            lines.append(_median_line("`concurrent`, calibrated, across servers only",
                                      [abs(err(r["concurrent"], r["point"]["busbw_GBps"])) for r in cross], TARGET_A2A))
            lines += ["", "Where the remaining error across servers comes from: the fraction of the line rate each "
                      "NIC carried in the measured all-to-all (algbw x (n - g) / n per NIC, g GPUs per server: "
                      "the bytes a rank sends to other servers) against the calibration row's fraction:", ""]
            for r in cross:
                row, pt = r["row"], r["point"]
                n, g = r["gpus"], row["gpus_per_server"]
                algbw = pt["busbw_GBps"] * n / (n - 1)
                implied = algbw * (n - g) / n / (row["nic_gbps"] / 8)
                lines.append(f"- `{row['name']}` {pt['size_bytes'] / 2**20:.0f} MiB: {implied:.3f} in the all-to-all, "
                             f"{r['eff']:.4f} in the calibration row.")
            lines += _cross_server_causes(cross)
        lines += _intra_server_diagnosis(a2a, data.get("intra_server_reference", []))
    lines += ["", "Missing: " + " ".join(data["missing"].split())]
    return "\n".join(lines)


def _jobs(e2e: list[dict]) -> list[str]:
    """What the rows of one model share: one time for rows that differ only in software, the
    measured and simulated ratio for rows at several batches, and the simulated breakdown."""
    out = ["Rows by model (packet level, calibrated):", ""]
    by_model: dict[str, list[dict]] = {}
    for r in e2e:
        by_model.setdefault(r["row"]["model"]["zoo"], []).append(r)
    for zoo, rows in by_model.items():
        names = ", ".join(f"`{r['row']['name']}`" for r in rows)
        first = rows[0]
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.3f} s" for k, v in first["packet"]["breakdown"].items() if v)
        line = f"- {zoo} ({names}): "
        if len({id(r['packet']) for r in rows}) == 1 and len(rows) > 1:
            line += ("one job measured with different software: mvopt predicts one time for all of them, so "
                     "they are not independent evidence, and their spread "
                     f"({(max(r['measured_s'] for r in rows) / min(r['measured_s'] for r in rows) - 1) * 100:.0f} %) "
                     "is software that the model does not distinguish. ")
        elif len(rows) > 1:
            last = rows[-1]
            m0, m1 = _microbatches(first["row"]), _microbatches(last["row"])
            fit = {k: _line_fit(m0, m1, t(first), t(last)) for k, t in
                   (("measured", lambda r: r["measured_s"]), ("simulated", lambda r: r["packet"]["t_s"]))}
            line += (f"the same layout at global batches {first['row']['parallel']['global_batch']} and "
                     f"{last['row']['parallel']['global_batch']} ({m0} and {m1} micro-batches): measured time "
                     f"ratio {last['measured_s'] / first['measured_s']:.3f}, simulated "
                     f"{last['packet']['t_s'] / first['packet']['t_s']:.3f}. A line through the two points, "
                     "time = fixed + per micro-batch x micro-batches, gives measured "
                     f"{fit['measured'][0]:.3f} s + {fit['measured'][1] * 1e3:.1f} ms, simulated "
                     f"{fit['simulated'][0]:.3f} s + {fit['simulated'][1] * 1e3:.1f} ms: per micro-batch (the "
                     "busiest stage's forward and backward) "
                     f"{(fit['simulated'][1] / fit['measured'][1] - 1) * 100:+.0f} % "
                     f"({(fit['measured'][1] - fit['simulated'][1]) * 1e3:.1f} ms shorter), per iteration (pipeline fill "
                     "and drain, gradient reduction, optimizer) "
                     f"{(fit['simulated'][0] / fit['measured'][0] - 1) * 100:+.0f} % (the rows ran different "
                     "software, which the line mixes in). ")
        line += f"Simulated breakdown of `{first['row']['name']}`: {parts}. " + _stage_line(first["row"])
        out.append(line)
    return out


# compute-model operators by the part of a MoE layer they belong to (the rest: memory-bound kernels)
_PARTS = {"flash_attention": "attention core", "qkv": "dense GEMMs", "attn_proj": "dense GEMMs",
          "router": "dense GEMMs", "logits": "dense GEMMs", "expert_fc1": "expert GEMMs",
          "expert_fc2": "expert GEMMs", "permute": "permutation", "unpermute": "permutation",
          "expert_sort": "permutation", "expert_unsort": "permutation"}


def _stage_parts(row: dict) -> tuple[int, dict[str, float], float]:
    """(busiest pipeline stage, its compute per micro-batch by part in seconds, the expert GEMMs'
    achieved fraction of the large-GEMM rate) from the compute model: forward and backward of the
    stage's layers (every virtual chunk), the embedding or output layer where the stage has it,
    at the busiest EP rank's load."""
    from mvopt.config import ParallelismConfig
    from mvopt.workload.compute import DEFAULT_EFFICIENCY, ComputeModel, embedding_ops, layer_ops, output_ops
    from mvopt.workload.models import get_model
    from mvopt.workload.routing import busiest_load

    p = row["parallel"]
    par = ParallelismConfig(tp=p["tp"], pp=p["pp"], virtual_stages=p["virtual_stages"], ep=p["ep"],
                            dp=row["gpus"] // (p["tp"] * p["pp"]), micro_batch=p["micro_batch"],
                            global_batch=p["global_batch"])
    model = get_model(row["model"]["zoo"]).with_seq_len(row["model"]["seq"])
    cm = ComputeModel(row["gpu"])
    load = busiest_load(model, par, 1.0)
    per_chunk = model.layers // (par.pp * par.virtual_stages)
    best: tuple[int, dict[str, float], float] | None = None
    for stage in range(par.pp):
        parts: dict[str, float] = {}
        ops = []
        for chunk in range(par.virtual_stages):
            first = (chunk * par.pp + stage) * per_chunk
            for (moe, sliding), n in model.layer_kinds_in(first, per_chunk).items():
                ops += [(o, n) for o in layer_ops(model, par, flash_attention=True, moe=moe, sliding=sliding, load=load)]
        ops += [(o, 1) for o in (output_ops(model, par) if stage == par.pp - 1 else
                                 embedding_ops(model, par) if stage == 0 else [])]
        for o, n in ops:
            part = _PARTS.get(o.name, "other memory-bound")
            parts[part] = parts.get(part, 0.0) + n * cm.op_time_s(o)
        expert = [(o, n) for o, n in ops if _PARTS.get(o.name) == "expert GEMMs"]
        rate = cm.gpu.peak_bf16_flops * cm.gpu.matmul_efficiency * DEFAULT_EFFICIENCY.gemm_fraction
        frac = sum(n * o.flops for o, n in expert) / rate / parts["expert GEMMs"]
        if best is None or sum(parts.values()) > sum(best[1].values()):
            best = (stage, parts, frac)
    assert best is not None
    return best


def _stage_line(row: dict) -> str:
    stage, parts, frac = _stage_parts(row)
    order = ("expert GEMMs", "dense GEMMs", "permutation", "attention core", "other memory-bound")
    return (f"Compute of its busiest pipeline stage (stage {stage}) per micro-batch, forward and backward, in the "
            "compute model: " + ", ".join(f"{k} {parts[k] * 1e3:.1f} ms" for k in order if k in parts)
            + f" (sum {sum(parts.values()) * 1e3:.1f} ms; the expert GEMMs at {frac:.2f} of the large-GEMM rate, "
            "from their per-expert shapes).")


def _microbatches(row: dict) -> int:
    p = row["parallel"]
    return p["global_batch"] // (p["micro_batch"] * row["gpus"] // (p["tp"] * p["pp"]))


def _line_fit(m0: int, m1: int, t0: float, t1: float) -> tuple[float, float]:
    """(intercept, slope) of the line through (m0, t0) and (m1, t1)."""
    slope = (t1 - t0) / (m1 - m0)
    return t0 - slope * m0, slope


def _cross_server_causes(cross: list[dict]) -> list[str]:
    """What the calibrated `concurrent` runs across servers rule out: NCCL's schedule (the spread
    between `concurrent` and `pairwise`) and per-peer latency (the spread of a row's error over
    its sizes)."""
    sched = max(abs(r["concurrent"] / r["pairwise"] - 1) * 100 for r in cross)
    by_row: dict[str, list[float]] = {}
    for r in cross:
        by_row.setdefault(r["row"]["name"], []).append(err(r["concurrent"], r["point"]["busbw_GBps"]))
    spread = {k: max(v) - min(v) for k, v in by_row.items() if len(v) > 1}
    out = ["", f"Not the schedule: `concurrent` and `pairwise` differ by at most {sched:.1f} % on these rows."]
    if spread:
        out[-1] += (" Not per-peer latency: the error is the same at every size of a row ("
                    + ", ".join(f"`{k}` within {s:.2f} points" for k, s in spread.items())
                    + "), where a fixed per-peer cost would weigh less at the larger size. What is left is bandwidth: the "
                    "measured all-to-all carried a lower fraction of each NIC's line rate than the same "
                    "platform's ring (above), which one `nic_efficiency` per cluster cannot express.")
    return out


def _ratio_line(ref: dict) -> str:
    """One reference row: its busbw at one size, or the all-to-all / all-gather ratio over its
    sizes >= 1 MiB (median and range)."""
    pts = [pt for pt in ref["points"] if pt["size_bytes"] >= 2**20]
    head = f"- `{ref['name']}` ({ref['gpu']}, {ref['gpus']} GPUs"
    if len(pts) == 1:
        bw = pts[0]["busbw_GBps"]
        parts = ", ".join(f"{k.replace('_', '-')} {v:.2f}" for k, v in bw.items())
        ratios = [f"all-to-all / all-gather {bw['all_to_all'] / bw['all_gather']:.3f}"]
        if "all_reduce" in bw:
            ratios.append(f"all-gather / all-reduce {bw['all_gather'] / bw['all_reduce']:.3f}")
        return f"{head}, {pts[0]['size_bytes'] / 2**20:.0f} MiB): busbw GB/s {parts}; {', '.join(ratios)}."
    ratio = {pt["size_bytes"]: pt["busbw_GBps"]["all_to_all"] / pt["busbw_GBps"]["all_gather"] for pt in pts}
    lo, hi = min(ratio, key=ratio.get), max(ratio, key=ratio.get)
    return (f"{head}, {len(pts)} sizes from {min(ratio) / 2**20:.0f} to {max(ratio) / 2**20:.0f} MiB): all-to-all / "
            f"all-gather median {statistics.median(ratio.values()):.3f}, lowest {ratio[lo]:.3f} at "
            f"{lo / 2**20:.0f} MiB, highest {ratio[hi]:.3f} at {hi / 2**20:.0f} MiB; "
            + ", ".join(f"{s / 2**20:.0f} MiB {r:.3f}" for s, r in ratio.items()) + ".")


def _intra_server_diagnosis(a2a: list[dict], refs: list[dict]) -> list[str]:
    """Lines on the rows inside one server: the intra-server model prices the all-to-all like
    an all-gather and derives that from its all-reduce curve; ``refs`` (the data's
    ``intra_server_reference``) are published measurements of those collectives on one
    platform that show how far apart they are."""
    if not any(r["row"]["servers"] == 1 for r in a2a):
        return []
    out = ["", "Inside one server no NIC is involved: the intra-server model prices an all-to-all like an "
           "all-gather, and without a fitted all-gather curve (only all-reduce sweeps are shipped) it takes "
           "the all-gather as half the ring all-reduce time, i.e. at the all-reduce's bus bandwidth "
           "(docs/training-model.md, *Intra-server collectives*). Published measurements of those collectives "
           "on one platform (`intra_server_reference` in the data):", ""]
    out += [_ratio_line(ref) for ref in refs]
    out += ["", "At large sizes the all-to-all moves data as fast as the all-gather (the A100 VM at 1 GiB; 8 B200 "
            "from 4 GiB), so pricing it like an all-gather holds there; at mid sizes (the B200 sweep from 128 MiB "
            "to 2 GiB) the all-to-all is slower, by the ratios above, and below 128 MiB the two alternate. "
            "(A Mixtral 8x7B layer's dispatch at micro-batch 1 and 4096 tokens is 64 MiB per GPU: 4096 tokens "
            "x 2 experts x 4096 x 2 bytes.) What the A100 row misses is the all-gather itself: on that VM the all-gather is faster than "
            "the all-reduce by the ratio above, and the model, deriving the all-gather from the all-reduce, "
            "inherits the all-reduce's lower bus bandwidth. The H100 row (4 GPUs) is predicted at 370 GB/s, "
            "NVIDIA's stated ring ceiling on H100 (nccl-tests #212, sjeaugey: \"NCCL can get an effective NVLink "
            "bandwidth of 370GB/s, which you can observe as 'BusBw' when running non-allreduce operations\"); "
            "its measured 334.90 GB/s comes from an issue about all-to-all throughput on that machine. Neither "
            "is corrected here: a per-GPU all-gather curve needs a published intra-server all-gather sweep (at "
            "least four sizes) on each GPU type mvopt models, and none was found."]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print the section instead of writing docs/validation.md")
    args = ap.parse_args()
    data = yaml.safe_load(DATA.read_text())
    effs = efficiencies(data)
    e2e = end_to_end(data["end_to_end"], effs)
    a2a = all_to_all(data["all_to_all"], effs)
    text = render(e2e, a2a, data, "python experiments/validate_moe.py")
    if args.no_write:
        print(text)
    else:
        update_section(DOC, "moe", text)
        print(f"wrote the moe section of {DOC}")


if __name__ == "__main__":
    main()
