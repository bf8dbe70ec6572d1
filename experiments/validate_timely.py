"""TIMELY on its paper's scenario: an N-to-1 incast at 10 Gb/s, mvopt's figures against what
the paper (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM
2015) reports, written to the ``timely`` section of docs/validation.md.

    python experiments/validate_timely.py             # simulate, write docs/validation.md
    python experiments/validate_timely.py --no-write  # print only

The scenario (:func:`incast_config`): N senders and one receiver on one switch (a leaf-spine
of one leaf), every link 10 Gb/s (the paper's NICs), each link's delay chosen so that the
unloaded RTT is about the paper's minimum RTT (20 us), TIMELY with the paper's parameters
(mvopt's defaults: T_low 50 us, T_high 500 us, delta 10 Mb/s, beta 0.8, alpha 0.875, min RTT
20 us, HAI after 5), PFC on (the paper's fabric is lossless), every sender starting at once with
``total / N`` bytes. The CPU backend runs it with the queue and link monitors on.

What is measured (:func:`incast_figures`), over the *steady window* (the second half of the time
before the first flow ends, after the incast's initial burst):

* utilisation of the bottleneck (the switch's port to the receiver): wire bytes sent x 8 over
  rate x window;
* RTT = the flows' unloaded RTT + the bottleneck queue's delay (queued bytes x 8 / rate), at
  every monitor sample: median, 99th percentile and maximum in the window, and the maximum over
  the whole run (the initial burst included);
* fairness: Jain's index of the flows' bytes sent in the window, and the slowest and fastest
  flow's share over the fair share (1/N of the bottleneck's rate).

*What-if, RTT sample per segment* (:func:`segment_what_if`): mvopt times one packet per RTT
(docs/engine.md, TIMELY); the paper's NIC gives one RTT sample per completed segment of 16-64 KB.
The what-if runs the reference simulator (mvopt/engine/reference.py, equal to the engine bit for
bit) with a flow timing a new packet only once a segment's worth of packets has been sent since
the last timed one, on a shorter incast (the reference is pure Python). It changes no engine
code; it says whether the sampling cadence explains a difference from the paper.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402

from mvopt.config import load_config  # noqa: E402

DOC = ROOT / "docs" / "validation.md"
LINK_GBPS = 10.0
# 4 link traversals per round trip (data in and out of the switch, the ACK back): 4 x 5 us
# plus serialisation gives an unloaded RTT just above the paper's minimum RTT of 20 us
DELAY_NS = 5000.0
TOTAL_BYTES = 50_000_000
SENDERS = (10, 40)
MONITOR_US = 100.0
WHAT_IF_SENDERS, WHAT_IF_BYTES = 10, 20_000_000
SEGMENTS_KB = (16, 64)


def incast_config(senders: int, total_bytes: int = TOTAL_BYTES, *, monitor_us: float = MONITOR_US,
                  delay_ns: float = DELAY_NS, timely: dict | None = None):
    """``senders`` hosts of one 10 Gb/s switch each send ``total_bytes / senders`` to host 0 under
    TIMELY (``timely``: overrides of ``network.timely``), queue and link monitors on."""
    return load_config({
        "name": f"timely_incast_{senders}",
        "cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": senders + 1,
                    "link_gbps": [LINK_GBPS, LINK_GBPS], "link_delay_ns": [delay_ns, delay_ns]},
        "network": {"cc": "timely", "timely": dict(timely or {})},
        "workload": {"kind": "tasks",
                     "tasks": [{"id": f"s{s}", "src": s, "dst": 0, "bytes": total_bytes // senders}
                               for s in range(1, senders + 1)]},
        "simulation": {"queue_monitor_ns": monitor_us * 1000, "link_monitor": True,
                       "monitor_max_samples": 100_000, "time_limit_ms": 1000},
    })


def jain(x: np.ndarray) -> float:
    """Jain's fairness index: (sum x)^2 / (n sum x^2); 1 when all are equal, 1/n when one has all."""
    x = np.asarray(x, float)
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))


def incast_figures(exp, r) -> dict:
    """The figures of one simulated incast (module docstring): times in us, rates in Gb/s."""
    if r.status != "done":
        raise RuntimeError(f"{exp.name}: {r.status} {r.diagnostic}")
    topo, p = exp.topology, exp.params
    node, peer = np.asarray(topo.port_node), np.asarray(topo.port_peer_node)
    bottleneck = int(np.nonzero(peer == 0)[0][0])
    senders = [int(np.nonzero(node == s)[0][0]) for s in range(1, topo.n_host)]
    rate = float(np.asarray(topo.port_rate_bps)[bottleneck])
    dt = r.monitor_interval_ps
    base_rtt_ps = float(np.asarray(p.flow_base_rtt_ps).max())
    rtt_us = (base_rtt_ps + r.queue_samples[bottleneck] * 8e12 / rate) / 1e6
    first_end = int(r.task_finish_ps[r.flow_ids].min())
    k0, k1 = (first_end // 2) // dt + 1, first_end // dt     # sample indices inside the window
    window_s = (k1 - k0) * dt / 1e12
    sent = (r.link_tx_samples[senders, k1] - r.link_tx_samples[senders, k0]).astype(float)
    fair = rate / len(senders)
    share = sent * 8 / window_s / fair
    wire = float(r.link_tx_samples[bottleneck, k1] - r.link_tx_samples[bottleneck, k0])
    steady = rtt_us[k0:k1 + 1]
    return {
        "senders": len(senders), "bytes_per_sender": int(exp.tasks.size_bytes[r.flow_ids[0]]),
        "makespan_us": r.makespan_ps / 1e6, "window_us": (k0 * dt / 1e6, k1 * dt / 1e6),
        "unloaded_rtt_us": base_rtt_ps / 1e6,
        "utilisation": wire * 8 / (rate * window_s),
        "rtt_p50_us": float(np.percentile(steady, 50)), "rtt_p99_us": float(np.percentile(steady, 99)),
        "rtt_max_us": float(steady.max()), "rtt_max_run_us": float(rtt_us.max()),
        "max_queue_kb": float(r.port_max_queue_bytes[bottleneck]) / 1e3,
        "jain": jain(sent), "share_min": float(share.min()), "share_max": float(share.max()),
        "drops": int(r.counters["data_packets_dropped"]), "pfc_pauses": int(r.counters["pfc_pauses"]),
    }


def run_incast(cfg) -> dict:
    """Build and simulate one incast configuration on the CPU backend; its figures."""
    from mvopt.build import build, simulate_built

    t0 = time.perf_counter()
    b = build(cfg)
    r, = simulate_built([b], backend="cpu")
    return {**incast_figures(b.experiment, r), "wall_s": time.perf_counter() - t0}


def segment_what_if(senders: int, total_bytes: int, segment_kb: int | None) -> dict:
    """The incast on the reference simulator, with one RTT sample per ``segment_kb`` KB sent
    (None: mvopt's one timed packet at a time, which the engine runs). Besides the figures, which
    rule of Algorithm 1 each sample in the steady window used: ``rule_t_low`` (RTT below T_low,
    + delta), ``rule_cut`` (a positive gradient between T_low and T_high), ``rule_other``
    (the rest), and ``cut_p50``, the median of rate after / rate before over the cuts."""
    from unittest import mock

    from mvopt.build import build
    from mvopt.engine import reference

    cfg = incast_config(senders, total_bytes)
    exp = build(cfg).experiment
    p = exp.params
    every = 1 if segment_kb is None else max(1, segment_kb * 1000 // p.payload)
    samples: list[tuple[int, float, float, float]] = []   # (time ps, rtt ps, rate before, after)

    class SegmentTimely(reference.Timely):
        """Times a new packet only ``every`` packets after the previous timed one (1: mvopt's
        rule) and records every sample."""

        next_seq = 0
        now = 0

        def on_send(self, flow, seq: int, fresh: bool, now: int) -> None:
            if seq == self.timed:
                self.timed = -1
            if self.timed < 0 and fresh and seq >= self.next_seq:
                self.timed, self.sent_at, self.next_seq = seq, now, seq + every

        def on_feedback(self, flow, fb, now: int) -> None:
            self.now = now
            super().on_feedback(flow, fb, now)

        def update(self, flow, rtt: float) -> None:
            before = flow.rate
            super().update(flow, rtt)
            samples.append((self.now, rtt, before, flow.rate))

    t0 = time.perf_counter()
    with mock.patch.object(reference, "Timely", SegmentTimely):
        r = reference.simulate_reference(exp)
    f = incast_figures(exp, r)
    lo, hi = (w * 1e6 for w in f["window_us"])
    steady = [s for s in samples if lo <= s[0] <= hi]
    t_low, t_high = float(p.timely_t_low_ps), float(p.timely_t_high_ps)
    cuts = [after / before for _, rtt, before, after in steady if t_low <= rtt <= t_high and after < before]
    n_low = sum(1 for s in steady if s[1] < t_low)
    return {**f, "segment_kb": segment_kb, "rule_t_low": n_low, "rule_cut": len(cuts),
            "rule_other": len(steady) - n_low - len(cuts),
            "cut_p50": float(np.median(cuts)) if cuts else float("nan"), "wall_s": time.perf_counter() - t0}


def _row(f: dict, first: str) -> str:
    return (f"| {first} | {f['makespan_us'] / 1e3:.2f} | {f['window_us'][0] / 1e3:.1f}-{f['window_us'][1] / 1e3:.1f} "
            f"| {f['utilisation']:.3f} | {f['unloaded_rtt_us']:.1f} "
            f"| {f['rtt_p50_us']:.1f} / {f['rtt_p99_us']:.1f} / {f['rtt_max_us']:.1f} | {f['rtt_max_run_us']:.0f} "
            f"| {f['max_queue_kb']:.0f} | {f['jain']:.4f} | {f['share_min']:.2f}-{f['share_max']:.2f} | {f['drops']} |")


def _what_if_row(f: dict) -> str:
    how = "one timed packet at a time" if f["segment_kb"] is None else f"one per {f['segment_kb']} KB"
    return (f"| {how} | {f['makespan_us'] / 1e3:.2f} | {f['utilisation']:.3f} "
            f"| {f['rtt_p50_us']:.1f} / {f['rtt_p99_us']:.1f} / {f['rtt_max_us']:.1f} | {f['jain']:.4f} "
            f"| {f['rule_t_low']} / {f['rule_cut']} / {f['rule_other']} "
            f"| {'-' if np.isnan(f['cut_p50']) else format(f['cut_p50'], '.3f')} |")


WHAT_IF_HEADER = ("| RTT samples | makespan (ms) | utilisation | RTT p50 / p99 / max | Jain "
                  "| samples: < T_low / cut / other | median cut |\n"
                  "|---|---:|---:|---:|---:|---:|---:|")

HEADER = ("| incast | makespan (ms) | window (ms) | utilisation | unloaded RTT | RTT p50 / p99 / max "
          "| RTT max, run | max queue (KB) | Jain | shares | drops |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def render(results: list[dict], what_if: list[dict], command: str, t) -> str:
    """The ``timely`` section of docs/validation.md."""
    rows = "\n".join(_row(f, f"{f['senders']} x {f['bytes_per_sender'] / 1e6:g} MB") for f in results)
    wrows = "\n".join(_what_if_row(f) for f in what_if)
    util = ", ".join(f"{f['utilisation']:.3f}" for f in results)
    p99 = ", ".join(f"{f['rtt_p99_us']:.0f}" for f in results)
    burst = ", ".join(f"{f['rtt_max_run_us']:.0f}" for f in results)
    jains = ", ".join(f"{f['jain']:.3f}" for f in results)
    return f"""## TIMELY on its paper's incast

{provenance(command)}

N senders and one receiver on one switch, 10 Gb/s links, link delays of 5 us (an unloaded RTT of
about the paper's minimum RTT, 20 us), TIMELY with the paper's parameters (T_low {t.t_low_us:g} us,
T_high {t.t_high_us:g} us, delta {t.delta_mbps:g} Mb/s, beta {t.beta:g}, alpha {t.alpha:g}, min RTT
{t.min_rtt_us:g} us, HAI after {t.hai_after}, minimum rate {t.min_rate_mbps:g} Mb/s), PFC on, all
senders starting at once with equal shares of {TOTAL_BYTES / 1e6:g} MB, on the CPU backend (the
script's docstring has the details). *Window*: the second half of the time before the first flow
ends (ms). *RTT*: unloaded RTT + the bottleneck queue's delay at each {MONITOR_US:g} us sample:
median / 99th percentile / maximum in the window (us), and the maximum over the whole run (the
initial burst). *Utilisation*: the bottleneck's wire bytes in the window over its capacity.
*Shares*: each flow's throughput in the window over the fair share (1/N of 10 Gb/s).

{HEADER}
{rows}

| the paper's claim (source) | mvopt (rows above) |
|---|---|
| "near line-rate throughput" (abstract) | utilisation {util} in the window |
| the RTT is held below T_high: above it every sample cuts the rate by beta (1 - T_high/RTT) (Algorithm 1) | steady RTT p99 {p99} us against T_high {t.t_high_us:g} us; the initial burst (every sender at 10 Gb/s until its first samples) reaches {burst} us |
| equal flows share the bottleneck (the gradient rule cuts every flow that sees the same RTTs by the same factor; Zhu et al., CoNEXT 2016, show that flows which start unequal can stay unequal) | Jain {jains} |

*What-if, one RTT sample per segment* (reference simulator, {WHAT_IF_SENDERS} x
{WHAT_IF_BYTES / WHAT_IF_SENDERS / 1e6:g} MB; the first row is mvopt's sampling, whose figures equal the
engine's). Columns as above, in the steady window; *samples*: the flows' RTT samples in the
window by the rule of Algorithm 1 they used (RTT below T_low: + delta; a cut: a positive
gradient between T_low and T_high; other: the rest), *median cut*: rate after / rate before.

{WHAT_IF_HEADER}
{wrows}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--senders", default=",".join(map(str, SENDERS)), help="comma-separated incast sizes")
    ap.add_argument("--no-what-if", action="store_true", help="skip the per-segment sampling what-if")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/validation.md alone")
    args = ap.parse_args(argv)
    results = []
    for n in (int(s) for s in args.senders.split(",")):
        results.append(run_incast(incast_config(n)))
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in results[-1].items()})
    what_if = []
    if not args.no_what_if:
        for seg in (None, *SEGMENTS_KB):
            what_if.append(segment_what_if(WHAT_IF_SENDERS, WHAT_IF_BYTES, seg))
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in what_if[-1].items()})
    command = "python experiments/validate_timely.py" + (
        f" --senders {args.senders}" if args.senders != ",".join(map(str, SENDERS)) else "") + (
        " --no-what-if" if args.no_what_if else "")
    text = render(results, what_if, command, incast_config(2).network.timely)
    if args.no_write:
        print(text)
    else:
        update_section(DOC, "timely", text)
        print(f"wrote section timely of {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
