"""Every load and store one window of workload (a) makes, by column, on the CPU: the kernels built
with ThreadSanitizer's instrumentation, whose entry points (experiments/l1_trace/trace_stub.c)
record the addresses instead of checking races; a switch's window in the serial schedule by
default (events in time order, as the GPU's graph kernel runs it; --switch-schedule lanes: port
by port, as the groups kernel runs it where it can). For the GPU's groups kernel, bound by the L1 its experiments share
(docs/decisions/0002-gpu-occupancy-and-block-shape.md), what matters is the 128-byte lines one experiment's
window touches and how often: the lines touched again and again are the per-event working set;
the lines touched once pass through. An LRU model of an L1 of --l1-kib gives a hit rate: the
window's accesses of every node (marked by the kernels' MV_TRACE_NODE hook) repeated for
--experiments experiments at distinct addresses, all their nodes' sequences interleaved one
access at a time, as an SM's threads run at once. Its absolute value is a model's (the GPU's
L1 is not LRU over single accesses, its threads do not advance in step), and it did not rank
layout changes as the GPU did (docs/decisions/0003-port-and-flow-state-as-records.md: three of
four changes it favoured gained nothing or lost there); the what-if options (--port-record, --ring-bytes,
--exclude, --sectors, --stores) show what a change would do to it, not to the GPU.

    PYTHONPATH=. python experiments/diag_l1_trace.py --mib 8 --skip 300
    PYTHONPATH=. python experiments/diag_l1_trace.py --mib 8 --skip 300 --experiments 12 --l1-kib 248

Needs g++ (and gcc) with -fsanitize=thread; not the tsan runtime (the stub replaces it).
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._cpu import SWITCH_SCHEDULES, CpuBackend  # noqa: E402
from mvopt.engine.backend_defaults import check_defines  # noqa: E402
from mvopt.engine.source import kernel_source  # noqa: E402

from diag_window_footprint import ring_slots  # noqa: E402  (this script's folder is on the path)

LINE = 128


def traced_library(defines: dict[str, int], out_dir: Path) -> ctypes.CDLL:
    """The CPU kernels, instrumented, linked with the recording stub (one thread, no OpenMP)."""
    src = out_dir / "kernels.cpp"
    src.write_text('#include <stdint.h>\nextern "C" void trace_node(int64_t v);\n' + kernel_source("cpu"))
    flags = ["-O2", "-std=c++17", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-w", "-DMV_TRACE_NODE(v)=trace_node(v)"]
    flags += [f"-D{k}={v}" for k, v in sorted(defines.items())]
    stub = Path(__file__).resolve().parent / "l1_trace" / "trace_stub.c"
    subprocess.run(["g++", *flags, "-fsanitize=thread", "-c", str(src), "-o", str(out_dir / "k.o")], check=True)
    subprocess.run(["gcc", "-O2", "-fPIC", "-c", str(stub), "-o", str(out_dir / "stub.o")], check=True)
    lib = out_dir / "traced.so"
    subprocess.run(["g++", "-shared", str(out_dir / "k.o"), str(out_dir / "stub.o"), "-o", str(lib)], check=True)
    return ctypes.CDLL(str(lib))


def aligned(a: np.ndarray, to: int = 256) -> np.ndarray:
    """A copy of `a` whose data starts at a multiple of `to` bytes (as CuPy places a GPU's columns),
    so that rows fall into lines as they do there (and the model does not vary from run to run)."""
    raw = np.zeros(a.nbytes + to, np.uint8)
    start = -raw.ctypes.data % to
    out = raw[start:start + a.nbytes].view(a.dtype)
    out[:] = a.ravel()
    return out


def column_of(addresses: np.ndarray, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The name of the array each address falls in ('stack and other' outside them)."""
    names = sorted(arrays, key=lambda k: arrays[k].ctypes.data)
    starts = np.array([arrays[k].ctypes.data for k in names], np.uint64)
    ends = np.array([arrays[k].ctypes.data + arrays[k].nbytes for k in names], np.uint64)
    i = np.searchsorted(starts, addresses, side="right") - 1
    inside = (i >= 0) & (addresses < ends[np.maximum(i, 0)])
    labels = np.array(names + ["stack and other"], dtype=object)
    return labels[np.where(inside, i, len(names))]


def lru_misses(nodes: list[tuple[np.ndarray, np.ndarray]], copies: int, capacity_lines: int,
               rounds: int = 2, streaming: frozenset = frozenset(), stores: list[np.ndarray] | None = None,
               write_evict: bool = False, sector_ids: list[np.ndarray] | None = None) -> tuple[float, dict[str, float]]:
    """An LRU cache of `capacity_lines` over `copies` experiments' windows, each the same per-node
    line sequences (`nodes`: lines and their columns) at its own addresses, every sequence of
    every copy advanced one access at a time (an SM's threads run at once), `rounds` windows, the
    first one warming it up. Lines of the `streaming` columns are evict-first (as the GPU's ring
    packets): a miss evicts the least recent of them while there is one. `stores` (per node,
    which accesses are stores; else every access is a load): a store is neither a hit nor a miss;
    it evicts its line if `write_evict`, else writes its sector into the line if the line is
    there (write-through, no allocation). `sector_ids` (per node, each access's 32-byte sector
    in its line): a sectored L1 (as a GPU's since Volta), whose lines hold the sectors fetched so
    far: a load of a sector not there is a miss too (the line stays). Returns the hit rate and
    the misses per experiment-window by column."""
    offset = max(int(s.max()) for s, _ in nodes if s.size) + 1
    flags = stores if stores is not None else [np.zeros(s.size, bool) for s, _ in nodes]
    secs = sector_ids if sector_ids is not None else [np.zeros(s.size, np.int64) for s, _ in nodes]
    seqs = [((s + e * offset).tolist(), c.tolist(), f.tolist(), (1 << x).tolist()) for e in range(copies)
            for (s, c), f, x in zip(nodes, flags, secs) if s.size]
    longest = max(len(s) for s, _, _, _ in seqs)
    normal: OrderedDict = OrderedDict()    # line -> its sectors present (a bit each)
    first: OrderedDict = OrderedDict()     # the evict-first lines
    hits = total = 0
    misses: dict[str, float] = {}
    for r in range(rounds):
        for i in range(longest):
            for s, c, f, x in seqs:
                if i >= len(s):
                    continue
                line, col, bit = s[i], c[i], x[i]
                cache = first if col in streaming else normal
                if f[i]:
                    if write_evict:
                        cache.pop(line, None)
                    elif line in cache:
                        cache[line] |= bit
                    continue
                if line in cache:
                    cache.move_to_end(line)
                    hit = bool(cache[line] & bit)
                    cache[line] |= bit
                else:
                    hit = False
                    cache[line] = bit
                    if len(normal) + len(first) > capacity_lines:
                        (first if first else normal).popitem(last=False)
                if r > 0:
                    total += 1
                    hits += hit
                    if not hit:
                        misses[col] = misses.get(col, 0) + 1 / copies
    return hits / max(1, total), misses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=8.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--cc", default="none")
    ap.add_argument("--skip", type=int, default=300, help="windows run first (the start-up)")
    ap.add_argument("--experiments", type=int, default=12, help="experiments sharing the modelled L1 (0: no model)")
    ap.add_argument("--l1-kib", type=int, default=248, help="the modelled L1 (KiB)")
    ap.add_argument("--switch-schedule", choices=SWITCH_SCHEDULES, default="serial",
                    help="how a switch's window is scheduled (serial: events in time order; lanes: port by port)")
    ap.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                    help="a kernel define (backend_defaults.KERNEL_DEFINES, e.g. MV_PUSH_LOCK=1)")
    ap.add_argument("--evict-first-rings", action="store_true",
                    help="ring lines evicted before any other (strictly: every ring access then misses at 12 "
                         "experiments, more than the GPU's evict-first hint does; by default they are LRU lines)")
    ap.add_argument("--exclude", default="", help="what-if: columns (comma-separated) kept out of the L1 "
                    "(in shared memory, say): their accesses are left out of the model")
    ap.add_argument("--port-record", type=int, default=0,
                    help="what-if: every port column (port_*) as one record of this many bytes per port, "
                         "the columns' rows one after the other in it (scaled down where they add up to more)")
    ap.add_argument("--port-columns", default="port_tx,port_in,port_q,port_head,port_wire,port_qmax,port_peer",
                    help="the columns --port-record merges")
    ap.add_argument("--stores", choices=("load", "update", "evict"), default="load",
                    help="what a store does: as a load (the model's first form), writes its sector "
                         "into its line if there (write-through, no allocation), or evicts its line")
    ap.add_argument("--sectors", action="store_true",
                    help="a sectored L1: 128-byte lines of four 32-byte sectors, each fetched on its own miss")
    ap.add_argument("--ring-bytes", type=int, default=32,
                    help="what-if: the wire rings' packet slots as records of this many bytes (16: half the "
                         "lines), each access at its proportional place in the smaller record")
    args = ap.parse_args()
    try:
        defines = check_defines({k: int(x) for k, x in (d.split("=", 1) for d in args.define)})
    except ValueError as e:
        ap.error(f"--define: {e}")
    batch = build_batch([build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))])
    backend = CpuBackend(threads=1, defines=defines, switch_schedule=args.switch_schedule)
    backend.run(batch, max_iters=args.skip)
    batch.cols = {k: aligned(v) for k, v in batch.cols.items()}
    batch.scratch = {k: aligned(v) for k, v in (batch.scratch or {}).items()}
    with tempfile.TemporaryDirectory() as tmp:
        lib = traced_library(defines, Path(tmp))
        lib.trace_begin.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        lib.trace_end.restype = ctypes.c_uint64
        buf = np.zeros(1 << 24, np.uint64)
        native = backend.lib
        backend.lib = lib
        for f in ("mv_sizeof_pkt", "mv_sizeof_int"):
            getattr(lib, f).restype = ctypes.c_int64
        lib.mv_run.restype = ctypes.c_int64
        lib.mv_run.argtypes = native.mv_run.argtypes
        lib.trace_begin(buf.ctypes.data, buf.size)
        backend.run(batch, max_iters=1)
        n = int(lib.trace_end())
    if n >= buf.size:
        sys.exit("the trace buffer filled up: raise its size")
    raw = buf[:n]
    marker = ((raw >> np.uint64(62)) & np.uint64(1)).astype(bool)
    segment = np.cumsum(marker)            # accesses after node k's marker: segment k (0: before any)
    seg_node = np.concatenate([[-1], (raw[marker] & np.uint64((1 << 62) - 1)).astype(np.int64)])
    raw, segment = raw[~marker], segment[~marker]
    n = raw.size
    stores = (raw >> np.uint64(63)).astype(bool)
    addresses = raw & np.uint64((1 << 62) - 1)
    arrays = {**batch.cols, **(batch.scratch or {})}
    cols = column_of(addresses, arrays)
    # packet slots: the wire rings' apart from the pools'
    pkt = cols == "pkt"
    slot = (addresses[pkt] - np.uint64(arrays["pkt"].ctypes.data)) // np.uint64(32)
    cols[np.flatnonzero(pkt)] = np.where(ring_slots(batch)[slot.astype(np.int64)], "pkt: rings", "pkt: pools")
    if args.ring_bytes != 32:      # the rings' slots moved to a region of their own, records shrunk
        ring = np.flatnonzero(cols == "pkt: rings")
        off = (addresses[ring] - np.uint64(arrays["pkt"].ctypes.data)).astype(np.int64)
        moved = (off // 32) * args.ring_bytes + (off % 32) * args.ring_bytes // 32
        addresses[ring] = np.uint64(1 << 56) + moved.astype(np.uint64)
    if args.port_record:          # the port columns as one array of records
        n_port = arrays["port_node"].size
        names = [k for k in args.port_columns.split(",") if k]
        widths = {k: arrays[k].nbytes // n_port for k in names}
        total = sum(widths.values())
        at = 0
        for k in names:
            mine = np.flatnonzero(cols == k)
            off = (addresses[mine] - np.uint64(arrays[k].ctypes.data)).astype(np.int64)
            port, within = off // widths[k], off % widths[k]
            moved = port * args.port_record + (at + within) * args.port_record // max(total, args.port_record)
            addresses[mine] = np.uint64(2 << 56) + moved.astype(np.uint64)
            at += widths[k]
        print(f"port columns as one record of {args.port_record} bytes: {', '.join(f'{k} {widths[k]}' for k in names)} "
              f"({total} bytes)")
    lines = (addresses // np.uint64(LINE)).astype(np.int64)
    print(f"workload (a), {args.mib:g} MiB, cc {args.cc}, one window after {args.skip}, switch schedule "
          f"{args.switch_schedule}{f', {defines}' if defines else ''}: "
          f"{n:,} accesses ({int(stores.sum()):,} stores), {np.unique(lines).size} distinct {LINE}-byte lines")
    print(f"{'column':<22} {'accesses':>9} {'lines':>6} {'lines 1x':>8} {'2-9x':>6} {'10x+':>6}")
    rows = []
    for name in np.unique(cols):
        mine = lines[cols == name]
        _, counts = np.unique(mine, return_counts=True)
        rows.append((counts.size, name, mine.size, int((counts == 1).sum()), int(((counts > 1) & (counts < 10)).sum()),
                     int((counts >= 10).sum())))
    for distinct, name, acc, once, some, many in sorted(rows, reverse=True):
        print(f"{name:<22} {acc:9,} {distinct:6} {once:8} {some:6} {many:6}")
    busiest = int(np.argmax(np.bincount(segment)[1:])) + 1
    mine = segment == busiest
    print(f"the busiest node's window (node {seg_node[busiest]}): {int(mine.sum()):,} accesses, "
          f"{np.unique(lines[mine]).size} distinct lines: " + ", ".join(
              f"{k} {int((cols[mine] == k).sum())}/{np.unique(lines[mine][cols[mine] == k]).size}"
              for k in sorted(set(cols[mine]), key=lambda k: -int((cols[mine] == k).sum()))))
    if args.experiments:
        keep = (cols != "stack and other") & ~np.isin(cols, [k for k in args.exclude.split(",") if k])
        parts = range(int(segment.max()) + 1)
        nodes = [(lines[keep & (segment == k)], cols[keep & (segment == k)]) for k in parts]
        sector = ((addresses // np.uint64(32)) % np.uint64(LINE // 32)).astype(np.int64)
        rate, misses = lru_misses(nodes, args.experiments, args.l1_kib * 1024 // LINE,
                                  streaming=frozenset({"pkt: rings"}) if args.evict_first_rings else frozenset(),
                                  stores=None if args.stores == "load" else [stores[keep & (segment == k)] for k in parts],
                                  write_evict=args.stores == "evict",
                                  sector_ids=[sector[keep & (segment == k)] for k in parts] if args.sectors else None)
        print(f"LRU model: {args.experiments} experiments' windows through an L1 of {args.l1_kib} KiB"
              f"{', ring lines evict-first' if args.evict_first_rings else ''}, stores: {args.stores}"
              f"{', 32-byte sectors' if args.sectors else ''}: "
              f"hit rate {rate:.3f} (the kernel's columns only; the stack is in registers on a CPU); misses "
              "per experiment-window: " + ", ".join(f"{k} {v:.0f}" for k, v in
                                                    sorted(misses.items(), key=lambda kv: -kv[1]) if v >= 1))


if __name__ == "__main__":
    main()
