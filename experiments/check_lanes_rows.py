"""A model of the GPU switch lanes' task tables (lanes_table and lanes_rows in
mvopt/engine/kernels/mv_cuda_main.cuh), checked on random groups: every (thread, port) entry of a
switch that runs port by port is taken exactly once, whatever the node order (the kernel's is
switches first, widest first, where the tables are smallest), with the rows port-major
(MV_LANES_ROWS_BY_SWITCH 0) or switch-major (the default). Prints the
warp-rows a phase takes for the groups of workloads (a) and (b). No GPU needed:

    python experiments/check_lanes_rows.py
"""

from __future__ import annotations

import random

WARP = 32


def table(widths: list[int], by_switch: bool = False) -> tuple[list[int], list[int], int]:
    """lanes_table: per port k, ends[k] (the threads [0, ends[k]) hold every switch with a port k)
    and row_end[k] (the warp-rows of ports 0..k), from each thread's switch width (0: not a switch
    in lanes); and the group's most ports. `by_switch`: instead of row_end, warp_end[g] (the rows
    of warps of threads 0..g)."""
    ports = max(widths, default=0)
    ends = [0] * ports
    for t, n in enumerate(widths):       # (each switch thread's atomicMax on ends[n - 1])
        if n:
            ends[n - 1] = max(ends[n - 1], t + 1)
    end = 0
    for k in range(ports - 1, -1, -1):
        end = ends[k] = max(end, ends[k])
    row_end, rows = [], 0
    if by_switch:
        g = 0
        while ports and g * WARP < ends[0]:
            rows += sum(1 for k in range(ports) if ends[k] > g * WARP)
            row_end.append(rows)
            g += 1
        return ends, row_end, ports
    for k in range(ports):
        rows += -(-ends[k] // WARP)
        row_end.append(rows)
    return ends, row_end, ports


def entries(widths: list[int], by_switch: bool = False) -> tuple[list[tuple[int, int]], int]:
    """lanes_rows: the (thread, port) tasks the rows hand out (those the task function runs: a
    switch's port below its width), and the rows."""
    ends, row_end, ports = table(widths, by_switch)
    rows = row_end[-1] if ports and row_end else 0
    out = []
    for row in range(rows):
        if by_switch:
            g = next(g for g in range(len(row_end)) if row < row_end[g])
            k, first = row - (row_end[g - 1] if g else 0), g * WARP
        else:
            k = next(k for k in range(ports) if row < row_end[k])
            first = (row - (row_end[k - 1] if k else 0)) * WARP
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
        for by_switch in (False, True):
            got, rows = entries(widths, by_switch)
            assert len(got) == len(set(got)) and sorted(got) == want, (by_switch, widths)
            assert rows == entries(widths)[1]   # (the kernel counts the rows port-major either way)
    a = entries([4] * 140 + [0] * 112)[1]           # (a): 7 experiments of 20 4-port switches, 16 hosts
    b = entries([32] * 8 + [8] * 16 + [0] * 128)[1]  # (b): 8 rail switches of 32 ports, 16 of 8, 128 hosts
    print(f"3,000 random groups, rows port-major and switch-major: every entry taken once. Warp-rows a "
          f"phase: (a) {a} (a row per 32 threads and port: 32), (b) {b} (256)")


if __name__ == "__main__":
    main()
