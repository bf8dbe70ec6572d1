"""``python -m mvopt calibrate LOG... [--out FILE]``: fit the intra-server collective model.

Reads nccl-tests logs (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``sendrecv_perf`` output), fits one curve per (GPU type, collective, GPU
count), prints the fit error per size and writes the parameter file. ``--published`` fits the
sweeps of published.yaml instead: that is how ``mvopt/data/intra_server_default.yaml`` is made.
``--nic-gbps`` reads logs of runs between two servers instead and prints ``cluster.nic_efficiency``
(:mod:`mvopt.comm.nic_efficiency`) per size and at the largest size.
"""

from __future__ import annotations

import argparse

import numpy as np

from mvopt.comm.intra import ALGORITHMS, Measured, dump_params, group_nccl_sweeps, published_sweeps
from mvopt.comm.nccl_tests import NcclSweep, read_nccl_tests
from mvopt.comm.nic_efficiency import nic_efficiency
from mvopt.errors import ConfigError, InputFileError
from mvopt.optimize.cli import positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="*", metavar="LOG", help="nccl-tests output files")
    parser.add_argument("--out", metavar="FILE", help="write the parameter file here (YAML)")
    parser.add_argument("--published", action="store_true",
                        help="fit the intra-server sweeps of published.yaml (the shipped defaults)")
    parser.add_argument("--gpu", help="GPU type of the logs (default: the device name they print)")
    parser.add_argument("--gpus", type=positive_int, help="GPU count (default: the log's Rank lines, else its nGpus header)")
    parser.add_argument("--collective", help="collective of the logs (default: the log's "
                        "'Collective test starting' line, else the *_perf binary it or its file name names), "
                        "e.g. all_reduce")
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="auto",
                        help="label of the fitted curves: what NCCL_ALGO forced (default: auto)")
    parser.add_argument("--placement", choices=("in-place", "out-of-place"), default="in-place",
                        help="which nccl-tests time to fit (default: in-place)")
    parser.add_argument("--nic-gbps", type=float, metavar="RATE",
                        help="the logs ran between two servers with NICs of RATE Gb/s (all_gather / all_reduce / "
                        "reduce_scatter with NCCL_ALGO=RING, or sendrecv between one GPU of each): print "
                        "cluster.nic_efficiency instead of fitting curves")
    parser.add_argument("--nics-per-server", type=positive_int, default=1, metavar="N",
                        help="with --nic-gbps: NICs per server the ring used (default: 1)")


def _measured(args: argparse.Namespace) -> list[Measured]:
    out: list[Measured] = []
    if args.published:
        out += [Measured(sw.gpu, sw.collective, sw.gpus, "auto", sw.sizes_bytes, sw.times_s,
                         (f"published.yaml: {sw.name}",)) for sw in published_sweeps()]
    sweeps = [sw for path in args.logs for sw in read_nccl_tests(path)]
    _check_complete(sweeps, args)
    if sweeps:
        out += group_nccl_sweeps(sweeps, gpu=args.gpu, collective=args.collective, gpus=args.gpus,
                                 algorithm=args.algorithm, placement=args.placement)
    return out


def _check_complete(sweeps: list[NcclSweep], args: argparse.Namespace) -> None:
    """One message naming everything the logs leave open and the options that give it."""
    missing: dict[str, list[str]] = {}
    for sw in sweeps:
        where = f"{sw.file}:{sw.line}"
        if args.collective is None and sw.collective is None:
            missing.setdefault("--collective NAME (e.g. all_reduce; the log has no 'Collective test starting' "
                               "line and names no *_perf binary, nor does its file name)", []).append(where)
        if args.gpus is None and sw.nranks is None:
            missing.setdefault("--gpus N (the log has no 'nGpus' header and no '#  Rank' lines)", []).append(where)
        if args.gpu is None and sw.gpu_name is None:
            missing.setdefault("--gpu TYPE (the log's '#  Rank' lines name no single device)", []).append(where)
    if missing:
        items = [f"{option}: {', '.join(dict.fromkeys(places))}" for option, places in missing.items()]
        raise InputFileError(sweeps[0].file, None, "the logs do not say everything the fit needs; pass "
                             + "; ".join(items))


def _size(n: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n:g} B"


def _nic_efficiency(args: argparse.Namespace) -> int:
    if not args.logs or args.published or args.out:
        raise ConfigError("--nic-gbps", "takes nccl-tests logs only (no --published, no --out)", args.nic_gbps)
    sweeps = [sw for path in args.logs for sw in read_nccl_tests(path)]
    for sw in sweeps:
        coll = args.collective or sw.collective
        if coll is None:
            raise InputFileError(sw.file, sw.line, "names no collective; pass --collective")
        print(f"{sw.file}:{sw.line} {coll}, {args.nics_per_server} NIC(s) of {args.nic_gbps:g} Gb/s per server")
        print(f"  {'size':>10}  {'busbw GB/s':>10}  {'nic_efficiency':>14}")
        eff = None
        for p in sw.points:
            busbw = p.busbw_in_GBps if args.placement == "in-place" else p.busbw_out_GBps
            if busbw != busbw:       # N/A
                continue
            eff = nic_efficiency(coll, busbw, args.nic_gbps, args.nics_per_server)
            print(f"  {_size(p.size_bytes):>10}  {busbw:10.2f}  {eff:14.4f}")
        if eff is not None:
            print(f"  cluster.nic_efficiency at the largest size: {eff:.4f}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.nic_gbps is not None:
        return _nic_efficiency(args)
    if not args.logs and not args.published:
        raise ConfigError("LOG", "give at least one nccl-tests log, or --published", show_value=False)
    curves = []
    for m in _measured(args):
        curve = m.fit()
        curves.append(curve)
        pred = np.asarray(curve.time_s(m.sizes_bytes))
        err = (pred / m.times_s - 1.0) * 100.0
        print(f"{curve.gpu} {curve.collective} x{curve.gpus} ({curve.algorithm}) from {curve.source}")
        print(f"  {'size':>10}  {'measured us':>12}  {'model us':>12}  {'error %':>8}")
        for s, t, p, e in zip(m.sizes_bytes, m.times_s, pred, err):
            print(f"  {_size(s):>10}  {t * 1e6:12.2f}  {p * 1e6:12.2f}  {e:+8.2f}")
        big = np.abs(err[m.sizes_bytes >= 2**20])
        if big.size:
            print(f"  median |error| for sizes >= 1 MiB: {np.median(big):.2f} % (max {big.max():.2f} %)")
    if args.out:
        dump_params(curves, args.out)
        print(f"wrote {len(curves)} curve(s) to {args.out}")
    else:
        print("(no --out given: parameter file not written)")
    return 0
