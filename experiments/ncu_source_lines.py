"""Per-source-line figures of an Nsight Compute report, as JSON: for every instanced metric that
ncu correlates with instruction addresses (warp-stall samples, instructions executed, L1/L2
sectors ... of the SourceCounters section), its sum per line of CUDA source. `ncu --page source`
prints the source without these columns, so this reads the report through ncu's own Python
module (`extras/python/ncu_report.py` of the Nsight Compute install, on the device machine).

    python3 experiments/ncu_source_lines.py REPORT.ncu-rep OUT.json

The source itself is in the report (`--import-source yes`) and in the JSON (`source`): read it
beside the figures with `python3 experiments/ncu_source_lines.py --top OUT.json [METRIC]`, or
summed by the data structure each line touches (packet slots, port records, flows ...) with
`--by-structure OUT.json`, or by the function they belong to with `--by-function OUT.json`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from collections import defaultdict


def _ncu_report():
    ncu = shutil.which("ncu")
    roots = [os.path.join(os.path.dirname(os.path.realpath(ncu)), "extras", "python")] if ncu else []
    roots += glob.glob("/usr/local/cuda*/nsight-compute*/extras/python") + glob.glob("/opt/nvidia/nsight-compute/*/extras/python")
    for root in roots:
        if os.path.exists(os.path.join(root, "ncu_report.py")):
            sys.path.insert(0, root)
            import ncu_report
            return ncu_report
    raise SystemExit(f"ncu_report.py not found (looked in {roots})")


def per_line(report: str) -> dict:
    """{"metrics": {name: {"file:line": sum}}, "source": {file: text}} of the report's first kernel."""
    ncu_report = _ncu_report()
    action = ncu_report.load_report(report).range_by_idx(0).action_by_idx(0)
    where: dict[int, str] = {}
    out: dict[str, dict[str, float]] = {}
    for name in action.metric_names():
        m = action.metric_by_name(name)
        if not m.num_instances() or not m.has_correlation_ids():
            continue
        ids = m.correlation_ids()
        sums: dict[str, float] = defaultdict(float)
        for i in range(m.num_instances()):
            pc = ids.as_uint64(i)
            if pc not in where:
                info = action.source_info(pc)
                where[pc] = f"{os.path.basename(info.file_name())}:{info.line()}" if info else "?"
            sums[where[pc]] += m.as_double(i)
        if any(sums.values()):
            out[name] = dict(sums)
    try:
        source = {os.path.basename(k): v for k, v in action.source_files().items()}
    except Exception as err:  # older modules: no source access
        source = {"error": repr(err)}
    return {"metrics": out, "source": source}


def top(path: str, metric: str | None, n: int = 40) -> None:
    data = json.load(open(path))
    lines = {f: text.splitlines() for f, text in data["source"].items() if isinstance(text, str)}
    names = [metric] if metric else [k for k in data["metrics"] if "pcsamp_sample_count" in k or "sectors" in k]
    for name in names:
        sums = data["metrics"][name]
        total = sum(sums.values()) or 1.0
        print(f"== {name} (total {total:,.0f})")
        for where, v in sorted(sums.items(), key=lambda kv: -kv[1])[:n]:
            f, _, ln = where.rpartition(":")
            text = lines.get(f, [])[int(ln) - 1].strip() if ln.isdigit() and f in lines and int(ln) <= len(lines[f]) else ""
            print(f"{100 * v / total:5.1f}%  {where:>12}  {text[:110]}")


# What a line of the kernels touches, by the first pattern it matches (the generated source's names)
STRUCTURES = (("packet slots (pkt)", r"pkt\[|c->pkt|\bpk->|\bpk\.|Pkt "), ("port transmit record (PORT_T)", r"PORT_T\("),
              ("port queues (PORT_QH/QT)", r"PORT_Q[HT]\("), ("port ingress/PFC record (PORT_I)", r"PORT_I\("),
              ("port wire record (PORT_W)", r"PORT_W\("), ("ring heads (port_head)", r"port_head"),
              ("parameter loads (MvRo)", r"__ldg"), ("flows (f_*)", r"\bf_[a-z_]+\["),
              ("counters (ctr_add)", r"ctr_add|node_ctr"), ("routing", r"route_"), ("node rows (node_*)", r"node_[a-z_]+\["),
              ("switch port-time caches", r"ta_p|td_p|what_p|\bt2\b"), ("experiment rows (exp_*, EI)", r"exp_[a-zA-Z_]+\[|EI\("),
              ("heap and tasks", r"heap_|task_"))


def by_structure(path: str) -> None:
    """Each metric's share by the data structure its source lines touch (STRUCTURES; 'other' for
    the rest), for the sectors requested and the stall samples."""
    import re
    data = json.load(open(path))
    name = next(f for f in data["source"] if f.endswith(".cu"))
    lines = data["source"][name].splitlines()
    for metric in ("memory_l2_theoretical_sectors_global", "smsp__pcsamp_sample_count"):
        sums: dict[str, float] = defaultdict(float)
        for where, v in data["metrics"][metric].items():
            f, _, ln = where.rpartition(":")
            text = lines[int(ln) - 1] if f == name and ln.isdigit() and int(ln) <= len(lines) else ""
            sums[next((s for s, rx in STRUCTURES if re.search(rx, text)), "other")] += v
        total = sum(sums.values()) or 1.0
        print(f"== {metric}")
        for s, v in sorted(sums.items(), key=lambda kv: -kv[1]):
            print(f"{100 * v / total:5.1f}%  {s}")


def function_of_lines(lines: list[str]) -> list[str]:
    """The function each source line belongs to: the last definition at column 0 above it
    (MV_DEV, MV_COLD, MV_GLOBAL, __device__, templates of them); lambdas count as their
    enclosing function."""
    import re
    start = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:MV_DEV|MV_COLD|MV_GLOBAL|__device__)\b[^;(]*?\b(\w+)\s*\(")
    bounds = re.compile(r"__launch_bounds__\([^)]*\)")
    current, out = "(file scope)", []
    for text in lines:
        m = start.match(bounds.sub("", text))
        if m:
            current = m.group(1)
        out.append(current)
    return out


def by_function(path: str) -> None:
    """Stall samples, instructions executed and L2 sectors requested by the kernels' function
    (inlined code counts in the function whose source it is): where a role's time goes."""
    data = json.load(open(path))
    name = next(f for f in data["source"] if f.endswith(".cu"))
    owner = function_of_lines(data["source"][name].splitlines())
    for metric in ("smsp__pcsamp_sample_count", "inst_executed", "memory_l2_theoretical_sectors_global"):
        sums: dict[str, float] = defaultdict(float)
        for where, v in data["metrics"].get(metric, {}).items():
            f, _, ln = where.rpartition(":")
            ok = f == name and ln.isdigit() and 0 < int(ln) <= len(owner)
            sums[owner[int(ln) - 1] if ok else "?"] += v
        total = sum(sums.values()) or 1.0
        print(f"== {metric} (total {total:,.0f})")
        for fn, v in sorted(sums.items(), key=lambda kv: -kv[1])[:30]:
            print(f"{100 * v / total:5.1f}%  {fn}")


if __name__ == "__main__":
    if sys.argv[1] == "--by-function":
        by_function(sys.argv[2])
    elif sys.argv[1] == "--top":
        top(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "--by-structure":
        by_structure(sys.argv[2])
    else:
        json.dump(per_line(sys.argv[1]), open(sys.argv[2], "w"))
