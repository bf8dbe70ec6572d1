"""Parser for the standard output of NVIDIA nccl-tests (``all_reduce_perf``, ``all_gather_perf``...).

A log holds one or more result tables::

    # Collective test starting: all_reduce_perf
    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) ...
    # Using devices
    #  Rank  0 Group  0 Pid 1234 on host device  0 [0x07] NVIDIA A100-SXM4-80GB
    ...
    #                                             out-of-place                       in-place
    #       size   count   type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)  (elements)                        (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
         1048576   262144  float    sum      -1    37.41   28.03   49.05      0    36.39   28.81   50.42      0

The collective comes from the ``Collective test starting`` line, else from the binary's name
(``all_reduce_perf``) where the log or the file's name gives it; the rank count from the ``Rank``
lines, else from the ``nThread N nGpus M`` header (N x M: one process's GPUs); the GPU from the
device name on the ``Rank`` lines. MPI output prefixes such as
``[1,0]<stdout>:`` and interleaved ``NCCL INFO`` lines are ignored. Older nccl-tests (no ``root``
column, an ``error`` column instead of ``#wrong``) parse too. Anything else raises
:class:`InputFileError` naming the file and line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from mvopt.errors import InputFileError

__all__ = ["NcclPoint", "NcclSweep", "parse_nccl_tests", "read_nccl_tests", "COLLECTIVES"]

# Collectives nccl-tests measures (binary name without _perf).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce",
               "sendrecv", "gather", "scatter", "hypercube")

_MPI_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_COLLECTIVE = re.compile(r"#\s*Collective test starting:\s*(\w+)")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\b.*?\bdevice\s+\d+\s+\[[^\]]*\]\s*(.*)$")  # (older ones print no Group)
_THREADS_GPUS = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_BINARY = re.compile(r"(?<![A-Za-z0-9])([a-z_]+?)_perf(?:_mpi)?(?![A-Za-z0-9])")
_INT = re.compile(r"^\d+$")


@dataclass(frozen=True)
class NcclPoint:
    """One row: message size and the measured time and bandwidths (out-of-place and in-place)."""

    size_bytes: int
    count: int
    time_out_us: float
    algbw_out_GBps: float
    busbw_out_GBps: float
    time_in_us: float          # NaN where nccl-tests printed N/A
    algbw_in_GBps: float
    busbw_in_GBps: float

    def time_us(self, placement: str = "in-place") -> float:
        """The time of ``placement`` ("in-place" or "out-of-place"); in-place falls back to
        out-of-place where nccl-tests printed N/A."""
        if placement == "out-of-place" or math.isnan(self.time_in_us):
            return self.time_out_us
        return self.time_in_us


@dataclass(frozen=True)
class NcclSweep:
    """One result table of a log."""

    file: str
    line: int                  # line of the column header
    collective: str | None     # e.g. "all_reduce"; None when neither the log nor its file name says
    nranks: int | None         # from the "Rank" lines, else the nThread x nGpus header; None when absent
    gpu_name: str | None       # device name printed on the Rank lines
    dtype: str
    redop: str
    points: tuple[NcclPoint, ...] = field(default=())


def _strip(line: str) -> str:
    return _MPI_PREFIX.sub("", line.rstrip("\n")).strip()


def _number(tok: str, file: str, lineno: int, what: str) -> float:
    if tok == "N/A":
        return math.nan
    try:
        return float(tok)
    except ValueError:
        raise InputFileError(file, lineno, f"expected a number for {what}, got {tok!r}") from None


def _binary_collective(text: str, file: str) -> str | None:
    """The collective of the one nccl-tests binary the log's lines name (a command line), else
    its file's name (``all_reduce_perf.log``); None when neither names exactly one."""
    for where in (text, Path(file).name):
        names = {m.group(1) for m in _BINARY.finditer(where)} & set(COLLECTIVES)
        if len(names) == 1:
            return names.pop()
    return None


def parse_nccl_tests(text: str, file: str = "<string>") -> list[NcclSweep]:
    """Every result table of an nccl-tests log (see the module docstring)."""
    sweeps: list[NcclSweep] = []
    binary = _binary_collective(text, file)
    collective: str | None = None
    ranks: dict[int, str] = {}
    header_gpus: int | None = None          # nThread x nGpus of the latest header
    header: tuple[int, int] | None = None     # (line number, prefix columns before 'time')
    rows: list[NcclPoint] = []
    meta: tuple[str, str] = ("", "")

    def close() -> None:
        nonlocal header, rows, ranks
        if header is not None:
            if not rows:
                raise InputFileError(file, header[0], "results table has no data rows")
            names = set(ranks.values())
            sweeps.append(NcclSweep(file=file, line=header[0], collective=collective or binary,
                                    nranks=len(ranks) or header_gpus,
                                    gpu_name=names.pop() if len(names) == 1 else None,
                                    dtype=meta[0], redop=meta[1], points=tuple(rows)))
        header, rows, ranks = None, [], {}

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _strip(raw)
        if not line:
            continue
        if line.startswith("#"):
            m = _COLLECTIVE.match(line)
            if m:
                close()
                collective = re.sub(r"_perf(_mpi)?$", "", m.group(1))
                continue
            m = _THREADS_GPUS.match(line)
            if m:
                header_gpus = int(m.group(1)) * int(m.group(2))
                continue
            m = _RANK.match(line)
            if m:
                if header is not None:
                    close()
                ranks[int(m.group(1))] = m.group(2).strip()
                continue
            toks = line.lstrip("#").split()
            if toks[:2] == ["size", "count"] and "time" in toks and "busbw" in toks:
                if header is not None:
                    close()
                prefix = toks.index("time")
                if prefix not in (4, 5) or len(toks) not in (prefix + 4, prefix + 8):
                    raise InputFileError(file, lineno, "unrecognised nccl-tests column header: "
                                         + " ".join(toks))
                header = (lineno, prefix)
            elif line.startswith("# Avg bus bandwidth") or line.startswith("# Out of bounds"):
                close()
            continue
        toks = line.split()
        if header is None or not _INT.match(toks[0]):
            continue    # NCCL INFO lines, launcher chatter between tables
        prefix = header[1]
        if len(toks) not in (prefix + 4, prefix + 8):
            raise InputFileError(file, lineno, f"results row has {len(toks)} fields, expected "
                                 f"{prefix + 8} (size, count, type, redop, [root,] then time, algbw, "
                                 "busbw, #wrong for out-of-place and in-place)")
        if not _INT.match(toks[1]):
            raise InputFileError(file, lineno, f"expected an element count, got {toks[1]!r}")
        meta = (toks[2], toks[3])
        vals = [_number(t, file, lineno, "a time/bandwidth column") for t in toks[prefix:]]
        out = vals[0:4]
        inp = vals[4:8] if len(vals) == 8 else [math.nan] * 4
        if any(math.isnan(x) for x in out[:3]):
            raise InputFileError(file, lineno, "out-of-place time/bandwidth missing")
        wrong = int(sum(x for x in (out[3], inp[3]) if not math.isnan(x)))
        if wrong:
            raise InputFileError(file, lineno, f"nccl-tests reports {wrong} wrong results (#wrong): "
                                 "the measurement is invalid")
        rows.append(NcclPoint(int(toks[0]), int(toks[1]), out[0], out[1], out[2], inp[0], inp[1],
                              inp[2]))
    close()
    if not sweeps:
        raise InputFileError(file, None, "not an nccl-tests log: no results table (a '#  size  count "
                             "type ... time algbw busbw' header followed by rows) was found")
    return sweeps


def read_nccl_tests(path: str | Path) -> list[NcclSweep]:
    """Parse an nccl-tests log file (see :func:`parse_nccl_tests`)."""
    p = Path(path)
    try:
        text = p.read_text(errors="replace")
    except OSError as e:
        raise InputFileError(str(p), None, f"cannot be read ({e.strerror})") from None
    return parse_nccl_tests(text, str(p))
