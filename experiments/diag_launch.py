"""Diagnosis: kernel time per idle window for each launch mode, in order, several times in one
process (is a mode slow only on its first run, or after another mode, or after the backend
returned its memory to the driver?), then the graph mode's window and advance kernels timed
apart (CUDA events around direct launches). Prints one line per run. Needs CuPy and a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import idle_experiments  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._gpu import GpuBackend  # noqa: E402


def main() -> None:
    exps = idle_experiments(1000)
    backends = {m: GpuBackend(launch=m) for m in ("graph", "coop", "async")}
    for m in ("graph", "graph", "coop", "graph", "async", "graph"):
        batch = build_batch(exps)
        windows = backends[m].run(batch)
        t = backends[m].last_timing
        print(f"{m:6} kernel {t['kernel_s']:.4f} s  {t['kernel_s'] / windows * 1e6:8.1f} us/window  "
              f"upload {t['upload_s']:.3f} s  graph captured {backends[m].graph_used}", flush=True)
    # the graph mode's two kernels apart: each launched directly between two CUDA events (the
    # launches' own gaps are then outside both figures), for 1 and for 1,000 idle experiments
    timed = GpuBackend(launch="graph", time_phases=True)
    for n in (1, 1000):
        batch = build_batch(idle_experiments(n))
        windows = timed.run(batch)
        t = timed.last_timing
        ph = t["phase_s"]
        print(f"direct launches, {n:5} idle experiments: window kernel {ph['window'] / windows * 1e6:6.1f} us, "
              f"advance kernel {ph['advance'] / windows * 1e6:6.1f} us per window; "
              f"wall {t['kernel_s'] / windows * 1e6:6.1f} us per window", flush=True)


if __name__ == "__main__":
    main()
