"""A model of the GPU switch lanes' task tables (lanes_table and lanes_rows in
mvopt/engine/kernels/mv_cuda_main.cuh), checked on random groups: every (thread, port) entry of a
switch that runs port by port is taken exactly once, whatever the node order (the kernel's is
switches first, widest first, where the tables are smallest), with the rows switch-major (warp
of threads by warp, each warp's ports in turn) and their count taken port by port, as the kernel
counts them. Prints the warp-rows a phase takes for the groups of workloads (a) and (b). No GPU
needed:

    python experiments/check_lanes_rows.py
"""

from __future__ import annotations

import random

WARP = 32


def table(widths: list[int]) -> tuple[list[int], int, list[int], int]:
    """lanes_table: per port k, ends[k] (the threads [0, ends[k]) hold every switch with a port k);
    the rows, counted port by port (row_end[ports - 1]); per warp of threads g, warp_end[g] (the
    rows of warps 0..g); from each thread's switch width (0: not a switch in lanes); and the
    group's most ports."""
    ports = max(widths, default=0)
    ends = [0] * ports
    for t, n in enumerate(widths):       # (each switch thread's atomicMax on ends[n - 1])
        if n:
            ends[n - 1] = max(ends[n - 1], t + 1)
    end = 0
    for k in range(ports - 1, -1, -1):
        end = ends[k] = max(end, ends[k])
    rows = sum(-(-e // WARP) for e in ends)
    warp_end, taken, g = [], 0, 0
    while ports and g * WARP < ends[0]:
        taken += sum(1 for k in range(ports) if ends[k] > g * WARP)
        warp_end.append(taken)
        g += 1
    return ends, rows, warp_end, ports


def entries(widths: list[int]) -> tuple[list[tuple[int, int]], int]:
    """lanes_rows: the (thread, port) tasks the rows hand out (those the task function runs: a
    switch's port below its width), and the rows."""
    ends, rows, warp_end, ports = table(widths)
    out = []
    for row in range(rows):
        g = next(g for g in range(len(warp_end)) if row < warp_end[g])
        k, first = row - (warp_end[g - 1] if g else 0), g * WARP
        for lane in range(WARP):
            t = first + lane
            if t < ends[k] and t < len(widths) and k < widths[t]:
                out.append((t, k))
    return out, rows


def main() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        widths = [rng.choice([0, 0, 0, 1, 2, 3, 4, 4, 8, 16, 17, 31, 32]) for _ in range(rng.randint(0, 256))]
        if rng.random() < 0.5:
            widths.sort(reverse=True)
        want = [(t, k) for t, n in enumerate(widths) for k in range(n)]
        got, rows = entries(widths)
        assert len(got) == len(set(got)) and sorted(got) == want, widths
        # the rows counted port by port are the rows the warps take
        assert rows == (table(widths)[2] or [0])[-1], widths
    a = entries([4] * 140 + [0] * 112)[1]           # (a): 7 experiments of 20 4-port switches, 16 hosts
    b = entries([32] * 8 + [8] * 16 + [0] * 128)[1]  # (b): 8 rail switches of 32 ports, 16 of 8, 128 hosts
    print(f"3,000 random groups, rows switch-major: every entry taken once. Warp-rows a "
          f"phase: (a) {a} (a row per 32 threads and port: 32), (b) {b} (256)")


if __name__ == "__main__":
    main()
