"""End-to-end validation: every ``end_to_end`` row of published.yaml simulated with the network
at packet level, against the measured iteration time.

    python experiments/validate_end_to_end.py                 # all rows, writes docs/validation.md
    python experiments/validate_end_to_end.py --rows dgxc-gpt3-175b-bf16-128 --no-write
    python experiments/validate_end_to_end.py --payload 4096  # IB MTU-sized packets (much slower)
    python experiments/validate_end_to_end.py --backend gpu   # on a GPU

Each row becomes an experiment configuration (``workload.kind: training``):

* **cluster**: the row's servers (8 GPUs each) on one *rail plane* of its rail-optimised
  InfiniBand fabric: a non-blocking leaf-spine, 32 servers per leaf (fewer when the job is
  smaller), one NIC per server standing for NIC 0 of every server (HDR 200 Gb/s on DGX A100 /
  Selene, NDR 400 Gb/s on DGX H100), 2 us per link (NIC, switch and cable latency, generous; the
  engine's window is the smallest link delay, so this also sets how many windows an active
  network costs: on ``dgxc-gpt3-175b-bf16-128`` 1 us and 5 us per link differ by 0.1 % in
  iteration time and 2x in run time). The spine layer is one spine per plane whose
  links carry a leaf's whole uplink bandwidth: InfiniBand's routing (deterministic per-destination
  tables, adaptive routing on NDR) spreads a leaf's traffic over its uplinks, which per-flow ECMP
  hashing over 32 spines does not (``--spines ecmp`` runs that variant: hash collisions slow the
  pipeline transfers that cross leaves). ``workload.rail_sample: true`` simulates
  the GPUs of local index 0 only. This is exact by symmetry for these layouts: the TP ranks of a
  group run identical schedules, every pipeline transfer and every (hierarchical) DP collective
  of a GPU stays on its rail, and the rails of a rail-optimised fabric share no link;
* **network**: InfiniBand is lossless with credit-based flow control and no ECN congestion
  control by default: ``cc: none`` with PFC (headroom raised to 4 packets per port so that PFC
  stays lossless with large packets); packets of ``--payload`` bytes (default 32,000, about the
  largest the engine's packet record allows, 32,767 bytes with the header: a simulation
  granularity that adds up to 4 store-and-forward hops of 1.3 us (HDR) to each flow, against
  flows of 6-400 MB; ``--payload 4096`` runs IB's MTU, ~8x more packets);
* **workload**: the model and layout of the row with the settings published.py fills in (see
  its ``assumptions``), plus what the rows' software did. The SC21 rows follow the authors'
  artifact scripts (NVIDIA/Megatron-LM ``examples/sc21/run_table_1.sh`` and ``CONFIG.sh``;
  ``mvopt.workload.published.SC21_TABLE1``): micro-batch 16 / 16 / 4 / 2, the 145.6B row
  interleaved with 2 model chunks per stage, fp16 training (``--fp16`` without
  ``--accumulate-allreduce-grads-in-fp32``: fp16 gradients, ``precision: mixed_adam``), and
  ``--DDP-impl torch`` for 1.7B / 7.5B (PyTorch DDP: 25 MB buckets all-reduced as the last
  micro-batch's backward produces them, ``overlap_grad_reduce: true, bucket_mb: 25``) or
  ``local`` for 39.1B / 145.6B (Megatron's DDP: one all-reduce after the pipeline flush,
  ``overlap_grad_reduce: false``). Korthikanti's rows also all-reduce after the flush. The NeMo
  rows run the launcher's gpt3/175b.yaml: distributed optimizer with 100 MB buckets and
  overlapped gradient and parameter synchronisation, ``ub_tp_comm_overlap``
  (``tp_comm_overlap: true``), fused attention. These settings were fixed from the sources
  before the rows were simulated with them.

The compute model was calibrated on ``korthikanti-22b`` (both of its times); those are marked and
left out of the error statistics.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402

from mvopt.config import config_to_dict, load_config  # noqa: E402
from mvopt.workload import CALIBRATION_ROWS, ZOO, published_runs  # noqa: E402
from mvopt.workload.published import TORCH_DDP_BUCKET_MB  # noqa: E402

LINK_GBPS = {"A100-SXM4-80GB": 200.0, "H100-SXM5-80GB": 400.0}


def zoo_name(model) -> str:
    for name, z in ZOO.items():
        if (z.layers, z.hidden, z.heads, z.vocab, z.seq_len, z.swiglu) == \
                (model.layers, model.hidden, model.heads, model.vocab, model.seq_len, model.swiglu):
            return name
    raise KeyError(model.name)


def headroom_bdp(payload: int, gbps: float, delay_ns: float) -> float:
    """PFC headroom per ingress port in BDPs: the default 3, or 4 packets when packets are larger
    (lossless operation needs the headroom to hold what is in flight when PAUSE is sent)."""
    bdp = gbps * delay_ns / 8
    return float(max(3, math.ceil(4 * (payload + 48) / bdp)))


@dataclass
class Case:
    row: str
    label: str          # which published time
    measured_s: float
    calibration: bool
    cfg: object
    notes: str
    sensitivity: str = ""   # non-empty: a what-if variant, reported apart, not in the statistics


DELAY_NS = 2000.0


def row_cases(run, payload: int, delay_ns: float = DELAY_NS, spines: str = "single") -> list[Case]:
    servers = run.gpus // 8
    per_leaf = min(servers, 32)
    rate = LINK_GBPS[run.gpu.name]
    # one spine carrying a leaf's whole uplink bandwidth (ideal load balancing, InfiniBand adaptive
    # routing), or one spine per leaf downlink with per-flow ECMP hashing
    up = rate * per_leaf if spines == "single" else rate
    nemo = run.name.startswith("dgxc-")
    par = {f: getattr(run.parallel, f) for f in run.parallel.__dataclass_fields__}
    if nemo:
        par.update(bucket_mb=100.0, overlap_grad_reduce=True, overlap_param_gather=True, tp_comm_overlap=True)
    elif run.ddp == "torch":
        par.update(bucket_mb=TORCH_DDP_BUCKET_MB, overlap_grad_reduce=True)
    else:
        par.update(overlap_grad_reduce=False)
    precision = run.precision
    base = {
        "name": run.name,
        "cluster": {"topology": "leaf_spine", "leaves": servers // per_leaf, "hosts_per_leaf": per_leaf,
                    "gpus_per_server": 8, "nics_per_server": 1, "gpu": run.gpu.name,
                    "link_gbps": [rate, up], "link_delay_ns": [delay_ns, delay_ns]},
        "network": {"cc": "none", "payload_bytes": payload,
                    "pfc": {"headroom_bdp": headroom_bdp(payload, LINK_GBPS[run.gpu.name], delay_ns)}},
        "workload": {"kind": "training", "model": zoo_name(run.model), "flash_attention": run.flash_attention,
                     "rail_sample": True, "precision": precision},
        "parallelism": par,
        "simulation": {"time_limit_ms": 20_000.0 * max(run.t_iter_s, 1.0)},
    }
    calib = run.name in CALIBRATION_ROWS
    notes = "; ".join(run.assumptions)
    out = [Case(run.name, par["recompute"], run.t_iter_s, calib, load_config(base), notes)]
    if run.t_iter_full_recompute_s is not None:
        full = dict(base, parallelism=dict(par, recompute="full"))
        out.append(Case(run.name, "full", float(run.t_iter_full_recompute_s), calib, load_config(full), notes))
    return out


def sensitivity_cases(run, payload: int, delay_ns: float = DELAY_NS, spines: str = "single") -> list[Case]:
    """What-if variants reported beside the validation (never used to choose a setting): the SC21
    rows with fp32 gradients (4 B per gradient all-reduced instead of the artifact's fp16)."""
    if not run.name.startswith("megatron-sc21"):
        return []
    out = []
    for c in row_cases(run, payload, delay_ns, spines):
        d = config_to_dict(c.cfg)
        d["workload"]["precision"] = "bf16_fp32_grad"
        out.append(Case(c.row, c.label, c.measured_s, c.calibration, load_config(d), c.notes,
                        sensitivity="fp32 gradients"))
    return out


def simulate_case(case: Case, backend: str) -> dict:
    from mvopt.build import build, training_report
    from mvopt.engine import simulate

    t0 = time.perf_counter()
    b = build(case.cfg)
    t1 = time.perf_counter()
    c1 = time.process_time()
    r, = simulate([b.experiment], backend=backend)
    t2 = time.perf_counter()
    cpu = time.process_time() - c1
    if r.status != "done":
        return {"status": r.status, "diagnostic": r.diagnostic, "build_s": t1 - t0, "sim_s": t2 - t1}
    rep = training_report(b.plan, r)
    rep.update(status="done", build_s=t1 - t0, sim_s=t2 - t1, sim_cpu_s=cpu, tasks=b.experiment.tasks.n,
               packets=int(r.counters["data_packets_sent"]), windows=int(r.windows))
    return rep


RESULTS = ROOT / "experiments" / "results" / "end_to_end.json"
# packets of 32,000 bytes: about the largest payload the engine's packet record allows (payload +
# header at most 32,767 bytes: a 16-bit field), so the fewest packets per flow
PAYLOAD = 32_000


def command(args) -> str:
    return "python experiments/validate_end_to_end.py" + (f" --payload {args.payload}" if args.payload != PAYLOAD else "") \
        + (f" --link-delay-ns {args.link_delay_ns:g}" if args.link_delay_ns != DELAY_NS else "") \
        + (f" --spines {args.spines}" if args.spines != "single" else "") \
        + (f" --backend {args.backend}" if args.backend != "cpu" else "") \
        + (" --no-sensitivity" if args.no_sensitivity else "")


def record(c: Case, rep: dict) -> dict:
    """What the report needs of one case (JSON)."""
    par = c.cfg.parallelism
    return {"row": c.row, "label": c.label, "measured_s": c.measured_s, "calibration": c.calibration,
            "layout": f"{par.tp}/{par.pp}/{par.virtual_stages}/{par.dp}, {par.micro_batch}, {par.global_batch}",
            "settings": {"precision": c.cfg.workload.precision, "overlap_grad_reduce": par.overlap_grad_reduce,
                         "bucket_mb": par.bucket_mb},
            "assumptions": c.notes, "sensitivity": c.sensitivity, "result": rep}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--payload", type=int, default=PAYLOAD, help=f"packet payload bytes (default {PAYLOAD})")
    ap.add_argument("--link-delay-ns", type=float, default=DELAY_NS,
                    help=f"propagation + forwarding delay of every link (default {DELAY_NS:g} ns)")
    ap.add_argument("--spines", choices=("single", "ecmp"), default="single",
                    help="spine layer: one spine with the leaf's whole uplink bandwidth (default; ideal load "
                         "balancing as InfiniBand adaptive routing), or one spine per leaf port with ECMP")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-sensitivity", action="store_true",
                    help="skip the what-if variants (SC21 rows with fp32 gradients)")
    ap.add_argument("--from-json", metavar="PATH",
                    help="do not simulate: rewrite the report from the results a full run saved "
                         f"(default run saves them to {RESULTS.relative_to(ROOT)})")
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        text = report(saved["records"], saved["command"], saved["wall_s"], saved["provenance"])
        print(text)
        if not args.no_write:
            update_section(ROOT / "docs" / "validation.md", "end_to_end", text)
        return
    wanted = {r for r in args.rows.split(",") if r}
    runs = [run for run in published_runs() if not wanted or run.name in wanted]
    cases = [c for run in runs for c in row_cases(run, args.payload, args.link_delay_ns, args.spines)]
    if not args.no_sensitivity:
        cases += [c for run in runs for c in sensitivity_cases(run, args.payload, args.link_delay_ns, args.spines)]
    records = []
    t_all = time.perf_counter()
    for c in cases:
        rep = simulate_case(c, args.backend)
        records.append(record(c, rep))
        if rep["status"] == "done":
            err = (rep["iteration_time_s"] - c.measured_s) / c.measured_s
            bd = rep["breakdown"]
            print(f"{c.row:28s} {c.label + (' ' + c.sensitivity if c.sensitivity else ''):9s} measured {c.measured_s:7.3f} s  simulated {rep['iteration_time_s']:7.3f} s "
                  f" error {100 * err:+6.1f} %  (build {rep['build_s']:.1f} s, sim {rep['sim_s']:.1f} s, "
                  f"{rep['packets']:,} packets) " + " ".join(f"{k}={v:.3f}" for k, v in bd.items()), flush=True)
        else:
            print(f"{c.row:28s} {c.label:9s} {rep['status']}: {rep.get('diagnostic', '')[:200]}", flush=True)
    wall = time.perf_counter() - t_all
    cmd = command(args)
    prov = provenance(cmd)
    text = report(records, cmd, wall, prov)
    print(text)
    if not wanted:
        path = RESULTS if cmd == command(ap.parse_args([])) else RESULTS.with_name(
            "end_to_end_" + cmd.split(".py", 1)[1].strip().replace("--", "").replace(" ", "_") + ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"command": cmd, "provenance": prov, "wall_s": wall, "records": records},
                                   indent=1, default=float) + "\n")
        print(f"results saved to {path.relative_to(ROOT)}")
    if not args.no_write and not wanted:
        update_section(ROOT / "docs" / "validation.md", "end_to_end", text)


def report(records: list[dict], cmd: str, wall: float, prov: str) -> str:
    lines = ["| row | GPUs | layout (tp/pp/v/dp, mbs, gbs) | recompute | measured (s) | simulated (s) | error | "
             "compute | TP | PP | DP | bubble (s) | MFU | peak mem (GiB) | role |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    errs = []
    what_if = [c for c in records if c.get("sensitivity")]
    for c in records:
        if c.get("sensitivity"):
            continue
        rep = c["result"]
        role = "calibration" if c["calibration"] else "validation"
        if rep["status"] != "done":
            lines.append(f"| {c['row']} | | {c['layout']} | {c['label']} | "
                         f"{c['measured_s']:.3f} | {rep['status']} | | | | | | | | | {role} |")
            continue
        err = (rep["iteration_time_s"] - c["measured_s"]) / c["measured_s"]
        if not c["calibration"]:
            errs.append((abs(err), c["row"]))
        bd = rep["breakdown"]
        lines.append(f"| {c['row']} | {rep['gpus']} | {c['layout']} | {c['label']} | {c['measured_s']:.3f} | "
                     f"{rep['iteration_time_s']:.3f} | {100 * err:+.1f} % | {bd['compute']:.3f} | {bd['tp_comm']:.3f} | "
                     f"{bd['pp_comm']:.3f} | {bd['dp_comm']:.3f} | {bd['bubble']:.3f} | {rep['mfu']:.3f} | "
                     f"{rep['peak_memory_bytes'] / 2**30:.1f} | {role} |")
    summary = ""
    if errs:
        med, worst = statistics.median(e for e, _ in errs), max(errs)
        ok = med <= 0.05 and worst[0] <= 0.10
        summary = (f"Validation rows ({len(errs)} measured times): median |error| **{100 * med:.1f} %**, worst "
                   f"**{100 * worst[0]:.1f} %** (`{worst[1]}`) (targets 5 % / 10 %: {'met' if ok else 'NOT met'}).")
    sens = ""
    if what_if:
        base = {(c["row"], c["label"]): c["result"] for c in records if not c.get("sensitivity")}
        rows = ["| row | variant | as validated: simulated (s) / error / DP (s) | variant: simulated (s) / error / DP (s) |",
                "|---|---|---|---|"]
        for c in what_if:
            a, b = base.get((c["row"], c["label"])), c["result"]
            if not a or a["status"] != "done" or b["status"] != "done":
                continue
            m = c["measured_s"]
            rows.append(f"| {c['row']} | {c['sensitivity']} | {a['iteration_time_s']:.3f} / "
                        f"{100 * (a['iteration_time_s'] / m - 1):+.1f} % / {a['breakdown']['dp_comm']:.3f} | "
                        f"{b['iteration_time_s']:.3f} / {100 * (b['iteration_time_s'] / m - 1):+.1f} % / "
                        f"{b['breakdown']['dp_comm']:.3f} |")
        sens = ("\n\n**Sensitivity** (what-if variants, not in the statistics and not used to choose any "
                "setting): the SC21 rows with fp32 gradients, i.e. 4 bytes per gradient all-reduced instead "
                "of the 2 of the artifact's `--fp16` runs.\n\n" + "\n".join(rows))
    return (f"## End-to-end iteration time\n\n{prov}\n\n"
            f"Every `end_to_end` row of `published.yaml`, simulated at packet level (see the script's docstring "
            f"for the cluster, network and workload settings; wall time of the whole run {wall:.0f} s). "
            f"Breakdown columns are seconds per iteration on the critical GPU (they sum to the simulated time). "
            f"The results are saved in `experiments/results/end_to_end.json`; `--from-json` rewrites this section "
            f"from them.\n\n"
            + "\n".join(lines) + "\n\n" + summary + sens + "\n\n" + NOTES)


NOTES = (
    "Notes. *Calibration*: the compute model's two efficiency fractions were fitted on both times of "
    "`korthikanti-22b` (docs/training-model.md); its task graph uses the same terms, so it reproduces "
    "them. *Settings of the SC21 rows* (Table 1 gives model, TP, PP, GPUs and batch only) come from the "
    "authors' artifact scripts, NVIDIA/Megatron-LM `examples/sc21/run_table_1.sh` and `CONFIG.sh`: "
    "micro-batch 16 / 16 / 4 / 2, the 145.6B model interleaved (5 layers per virtual stage: 2 chunks per "
    "stage), `--fp16` without `--accumulate-allreduce-grads-in-fp32` (fp16 gradients, all-reduced in fp16), "
    "`--DDP-impl torch` (1.7B, 7.5B: PyTorch DDP, 25 MB buckets overlapped with the last backward) or "
    "`local` (39.1B, 145.6B: one all-reduce after the flush); full recomputation "
    "(`--activations-checkpoint-method uniform`). They were fixed from the scripts before these rows were "
    "simulated with them. The NeMo rows follow the launcher's `gpt3/175b.yaml` (distributed optimizer with "
    "fp32 gradient reduce-scatter and bf16 parameter all-gather, 100 MB buckets, overlapped; "
    "`ub_tp_comm_overlap`). *Network*: one rail plane simulated (`rail_sample`), ideal spine load balancing "
    f"(`--spines ecmp` for per-flow hashing), packets of the command's `--payload` bytes (default {PAYLOAD:,}; "
    "`--payload 4096` for InfiniBand's MTU), 2 us "
    "links.\n")


if __name__ == "__main__":
    main()
