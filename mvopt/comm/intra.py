"""Calibrated intra-server (NVLink/NVSwitch) collective model: time = alpha + bytes / beta.

A :class:`Curve` is the time of one collective for one GPU type, GPU count and algorithm, as
piecewise alpha-beta regimes: for a message of ``S`` bytes in regime ``k``
(``max_bytes[k-1] < S <= max_bytes[k]``), ``t = alpha_k + S / beta_k``. Regimes are one octave
wide (breakpoints at powers of two) and continuous, so that the model is exact at every size
nccl-tests measures and linear in between.

Fitting (:func:`fit_curve`): a penalised regression (P-spline) of log(time) on a cubic B-spline
basis of log2(size) with one knot per octave (scikit-learn ``SplineTransformer`` and
``LinearRegression``), its smoothness chosen by generalised cross-validation on the sweep itself;
the regimes are the chords of that smooth curve between consecutive powers of two (times made
non-decreasing first).

Where no curve was fitted for a query, :class:`IntraServerModel` derives one (each rule is
documented in docs/training-model.md):

* ``ring`` on a GPU with NVLS (H100/H200), whose all-reduce sweeps are NCCL's automatic choice
  (NVLS at large sizes): the automatic curve, but never faster than the ring's bus-bandwidth
  ceiling (``nccl_facts.h100_ring_busbw_ceiling_GBps`` / NVLink line rate, times the GPU's NVLink
  bandwidth);
* all-gather / reduce-scatter from the ring all-reduce: half its time (half the ring steps, half
  the bytes per GPU); all-to-all like all-gather; send/recv between two GPUs of the server like
  one ring step: ``t_allgather(n S) / (n - 1)``;
* another GPU count ``n``: the same bus bytes on the measured count's curve
  (``t_n(S) = t_m(S * f(n) / f(m))``, ``f`` the nccl-tests bus factor);
* a GPU type without curves: the curve of the calibrated type with the same NVLS capability and
  the nearest NVLink bandwidth, its bandwidth term scaled by the ratio of NVLink bandwidths.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import yaml

from mvopt.cluster.gpus import GpuSpec, get_gpu, load_published
from mvopt.errors import ConfigError, InputFileError
from mvopt.files import read_text, write_text_atomic

__all__ = ["Regime", "Curve", "IntraServerModel", "Measured", "fit_curve", "bus_factor", "sweep_times",
           "group_nccl_sweeps",
           "published_sweeps", "fit_published", "load_params", "dump_params", "default_model",
           "ALGORITHMS", "COLLECTIVES", "DEFAULT_PARAMS"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
ALGORITHMS = ("auto", "ring", "nvls")
DEFAULT_PARAMS = "data/intra_server_default.yaml"
_MIB = 2**20


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor (2(n-1)/n for all-reduce)."""
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective == "send_recv":
        return 1.0
    raise ConfigError("collective", f"must be one of {', '.join(COLLECTIVES)}", collective)


@dataclass(frozen=True)
class Regime:
    """``t = alpha_s + bytes / beta_bytes_per_s`` for sizes up to ``max_bytes`` (inf: no limit).

    ``bytes`` is the per-rank size nccl-tests reports, so ``beta`` is a (marginal) algorithm
    bandwidth, not a bus bandwidth."""

    max_bytes: float
    alpha_s: float
    beta_bytes_per_s: float      # inf when the time does not grow inside the regime


@dataclass(frozen=True)
class Curve:
    """Fitted time of one (gpu, collective, gpus, algorithm)."""

    gpu: str
    collective: str
    gpus: int
    algorithm: str
    regimes: tuple[Regime, ...]
    source: str = ""
    size_range: tuple[float, float] = (0.0, math.inf)   # sizes the fit saw

    def time_s(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        """Time of a collective of ``nbytes`` (scalar or array)."""
        s = np.asarray(nbytes, dtype=float)
        edges = np.array([r.max_bytes for r in self.regimes[:-1]])
        k = np.searchsorted(edges, s, side="left")
        alpha = np.array([r.alpha_s for r in self.regimes])[k]
        inv_beta = np.array([0.0 if math.isinf(r.beta_bytes_per_s) else 1.0 / r.beta_bytes_per_s
                             for r in self.regimes])[k]
        t = alpha + s * inv_beta
        return float(t) if t.ndim == 0 else t

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu, "collective": self.collective, "gpus": self.gpus,
            "algorithm": self.algorithm, "source": self.source,
            "fitted_bytes": [int(self.size_range[0]), int(self.size_range[1])],
            "regimes": [{"max_bytes": None if math.isinf(r.max_bytes) else int(r.max_bytes),
                         "alpha_us": r.alpha_s * 1e6,
                         "beta_GBps": None if math.isinf(r.beta_bytes_per_s)
                         else r.beta_bytes_per_s / 1e9} for r in self.regimes],
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any], where: str) -> "Curve":
        try:
            regimes = tuple(Regime(math.inf if r["max_bytes"] is None else float(r["max_bytes"]),
                                   float(r["alpha_us"]) * 1e-6,
                                   math.inf if r["beta_GBps"] is None else float(r["beta_GBps"]) * 1e9)
                            for r in d["regimes"])
            lo, hi = d.get("fitted_bytes", [0, None])
            curve = Curve(gpu=str(d["gpu"]), collective=str(d["collective"]), gpus=int(d["gpus"]),
                          algorithm=str(d.get("algorithm", "auto")), regimes=regimes,
                          source=str(d.get("source", "")),
                          size_range=(float(lo), math.inf if hi is None else float(hi)))
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(where, "must be a curve with gpu, collective, gpus, algorithm and "
                              f"regimes of max_bytes, alpha_us, beta_GBps ({e})", show_value=False) from None
        if not regimes or not math.isinf(regimes[-1].max_bytes):
            raise ConfigError(f"{where}.regimes", "must end with a regime of max_bytes null", show_value=False)
        if curve.collective not in COLLECTIVES or curve.algorithm not in ALGORITHMS:
            raise ConfigError(where, f"collective must be one of {COLLECTIVES} and algorithm one of "
                              f"{ALGORITHMS}", (curve.collective, curve.algorithm))
        return curve


# ----------------------------------------------------------------------------------------------
# fitting


_LAMBDAS = 10.0 ** np.arange(-4.0, 4.01, 0.25)


def _basis(lo: float, hi: float):
    """Cubic B-spline basis over log2(size) with one knot per octave, linear beyond the ends."""
    from sklearn.preprocessing import SplineTransformer
    knots = np.arange(lo, hi + 1.0)[:, None]
    return SplineTransformer(knots=knots, degree=3, extrapolation="linear").fit(knots)


def _penalised_fit(basis, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P-spline (Eilers & Marx): least squares on the basis plus lambda * |second differences of
    the coefficients|^2, lambda chosen by generalised cross-validation. Returns the coefficients."""
    from sklearn.linear_model import LinearRegression
    b = basis.transform(x[:, None])
    d = np.diff(np.eye(b.shape[1]), n=2, axis=0)
    n, best = len(x), None
    for lam in _LAMBDAS:
        a = b.T @ b + lam * d.T @ d
        hat_trace = float(np.trace(b @ np.linalg.solve(a, b.T)))
        # The penalised problem as ordinary least squares on augmented rows.
        reg = LinearRegression(fit_intercept=False).fit(np.vstack([b, math.sqrt(lam) * d]),
                                                        np.concatenate([y, np.zeros(len(d))]))
        rss = float(np.sum((y - b @ reg.coef_) ** 2))
        gcv = n * rss / max(n - hat_trace, 1e-9) ** 2
        if best is None or gcv < best[0]:
            best = (gcv, reg.coef_)
    assert best is not None
    return best[1]


def fit_curve(sizes_bytes: Sequence[float], times_s: Sequence[float], *, gpu: str, collective: str,
              gpus: int, algorithm: str = "auto", source: str = "") -> Curve:
    """Fit a :class:`Curve` to measured (size, time) points (see the module docstring).

    The smooth fit is a P-spline of log(time) over log2(size); the regimes are its chords between
    consecutive powers of two covering the measured sizes. At least 4 points are needed.
    """
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if s.shape != t.shape or len(s) < 4 or np.any(s <= 0) or np.any(t <= 0):
        raise ConfigError(f"{gpu}/{collective}/{gpus}", "needs at least 4 points with positive sizes "
                          "and times", len(s))
    order = np.argsort(s)
    s, t = s[order], t[order]
    x, y = np.log2(s), np.log(t)
    lo, hi = math.floor(x[0]), max(math.ceil(x[-1]), math.floor(x[0]) + 1)
    basis = _basis(lo, hi)
    coef = _penalised_fit(basis, x, y)
    grid = 2.0 ** np.arange(lo, hi + 1)
    tg = np.maximum.accumulate(np.exp(basis.transform(np.log2(grid)[:, None]) @ coef))
    regimes = []
    for i in range(len(grid) - 1):
        slope = (tg[i + 1] - tg[i]) / (grid[i + 1] - grid[i])
        alpha = tg[i] - slope * grid[i]
        last = i == len(grid) - 2
        regime = Regime(math.inf if last else float(grid[i + 1]), float(alpha),
                        math.inf if slope <= 0 else float(1.0 / slope))
        if regimes and (regimes[-1].alpha_s, regimes[-1].beta_bytes_per_s) == (regime.alpha_s,
                                                                                regime.beta_bytes_per_s):
            regimes[-1] = regime          # same line as the previous octave: one regime
        else:
            regimes.append(regime)
    return Curve(gpu=gpu, collective=collective, gpus=gpus, algorithm=algorithm,
                 regimes=tuple(regimes), source=source, size_range=(float(s[0]), float(s[-1])))


def sweep_times(sizes_bytes: Sequence[float], busbw_GBps: Sequence[float], collective: str,
                n: int) -> np.ndarray:
    """Times (s) from nccl-tests bus bandwidths: t = size * factor / busbw."""
    s = np.asarray(sizes_bytes, dtype=float)
    return s * bus_factor(collective, n) / (np.asarray(busbw_GBps, dtype=float) * 1e9)


def _size_label(label: str) -> int:
    """'1K', '33M', '8G' -> the nearest power of two (the sweeps print rounded sizes)."""
    units = {"K": 1, "M": 2, "G": 3}
    if not label or label[-1] not in units:
        raise ConfigError("size label", "must end with K, M or G", label)
    return 2 ** round(math.log2(float(label[:-1]) * 1000 ** units[label[-1]]))


@dataclass(frozen=True)
class PublishedSweep:
    """One ``nccl_intra_server`` entry of published.yaml, sizes in bytes, times in seconds."""

    name: str
    gpu: str
    gpus: int
    collective: str
    sizes_bytes: np.ndarray = field(repr=False)
    times_s: np.ndarray = field(repr=False)


def published_sweeps() -> list[PublishedSweep]:
    """The intra-server sweeps of published.yaml, converted to (size, time)."""
    out = []
    for sw in load_published()["nccl_intra_server"]:
        labels = sw["size_label_busbw_GBps"]
        sizes = np.array([_size_label(k) for k in labels], dtype=float)
        times = sweep_times(sizes, list(labels.values()), sw["collective"], sw["gpus"])
        out.append(PublishedSweep(sw["name"], get_gpu(sw["gpu"]).name, sw["gpus"], sw["collective"],
                                  sizes, times))
    return out


def fit_published() -> list[Curve]:
    """One automatic-algorithm curve per sweep of published.yaml (the shipped defaults)."""
    return [fit_curve(sw.sizes_bytes, sw.times_s, gpu=sw.gpu, collective=sw.collective,
                      gpus=sw.gpus, source=f"published.yaml: {sw.name}") for sw in published_sweeps()]


# ----------------------------------------------------------------------------------------------
# parameter files


def dump_params(curves: Sequence[Curve], path: str | Path | None = None, *, comment: str = "") -> str:
    """Write curves as a parameter file (YAML); returns the text."""
    head = "".join(f"# {line}\n" for line in comment.splitlines()) if comment else ""
    head += ("# Intra-server collective model (mvopt.comm.intra): t = alpha_us + bytes / (beta_GBps * 1e3)"
             " [us]\n# in the first regime whose max_bytes >= bytes. Regenerate: python -m mvopt "
             "calibrate --published --out FILE\n")
    text = head + yaml.safe_dump({"version": 1, "curves": [c.to_dict() for c in curves]},
                                 sort_keys=False, default_flow_style=None, width=110)
    if path is not None:
        write_text_atomic(path, text)
    return text


def load_params(path: str | Path) -> list[Curve]:
    """Curves from a parameter file written by :func:`dump_params`."""
    p = Path(path)
    try:
        data = yaml.safe_load(read_text(p))
    except yaml.YAMLError as e:
        raise InputFileError(str(p), None, f"invalid YAML ({e})") from None
    return _curves_from_data(data, str(p))


def _curves_from_data(data: Any, where: str) -> list[Curve]:
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("curves"), list):
        raise ConfigError(where, "must be an intra-server parameter file (version: 1, curves: [...])",
                          show_value=False)
    return [Curve.from_dict(c, f"{where}: curves[{i}]") for i, c in enumerate(data["curves"])]


# ----------------------------------------------------------------------------------------------
# the model


def _ring_efficiency() -> float:
    facts = load_published()["nccl_facts"]
    return facts["h100_ring_busbw_ceiling_GBps"] / facts["h100_nvlink_line_rate_GBps_per_direction"]


class IntraServerModel:
    """Collective times inside one server from fitted curves, with the derivations of the module
    docstring where no curve matches a query."""

    def __init__(self, curves: Iterable[Curve]) -> None:
        self._curves: dict[tuple[str, str, int, str], Curve] = {}
        for c in curves:
            self._curves[(get_gpu(c.gpu).name, c.collective, c.gpus, c.algorithm)] = c

    @property
    def curves(self) -> list[Curve]:
        return list(self._curves.values())

    def time_s(self, collective: str, nbytes: float | np.ndarray, *, gpu: str | GpuSpec, gpus: int,
               algorithm: str = "auto") -> float | np.ndarray:
        """Time of ``collective`` over ``gpus`` GPUs of one server, ``nbytes`` per rank
        (all-reduce buffer, all-gather output, reduce-scatter input, send/recv message)."""
        if collective not in COLLECTIVES:
            raise ConfigError("collective", f"must be one of {', '.join(COLLECTIVES)}", collective)
        if algorithm not in ALGORITHMS:
            raise ConfigError("algorithm", f"must be one of {', '.join(ALGORITHMS)}", algorithm)
        spec = get_gpu(gpu)
        if algorithm == "nvls" and not (spec.nvls and collective == "all_reduce"):
            raise ConfigError("algorithm", "nvls exists only for all_reduce on GPUs with NVLink SHARP "
                              "(H100, H200)", algorithm)
        if gpus < 1:
            raise ConfigError("gpus", "must be >= 1", gpus)
        s = np.asarray(nbytes, dtype=float)
        if gpus == 1:
            return 0.0 if s.ndim == 0 else np.zeros_like(s)
        return self._time(collective, s, spec, gpus, algorithm)

    # -- derivations, from the most to the least specific
    def _time(self, coll: str, s: np.ndarray, spec: GpuSpec, n: int, algo: str):
        exact = self._curves.get((spec.name, coll, n, algo))
        if exact is not None:
            return exact.time_s(s)
        if algo == "nvls":
            return self._time(coll, s, spec, n, "auto")
        if coll == "send_recv":
            m = self._largest_n(spec)
            return self._time("all_gather", s * m, spec, m, "ring") / (m - 1)
        if coll in ("all_gather", "reduce_scatter", "all_to_all"):
            base = "all_gather" if coll == "all_to_all" else coll
            if base != coll and (spec.name, base, n, "ring") in self._curves:
                return self._time(base, s, spec, n, algo)
            return 0.5 * self._time("all_reduce", s, spec, n, "ring")
        # all_reduce
        if algo == "ring" and spec.nvls:
            auto = self._time("all_reduce", s, spec, n, "auto")
            ceiling = _ring_efficiency() * spec.nvlink_bytes_per_s
            return np.maximum(auto, s * bus_factor("all_reduce", n) / ceiling)
        # Without NVLS, NCCL's automatic choice inside a server is the ring: either curve serves.
        algos = ("auto",) if spec.nvls else (algo, "ring" if algo == "auto" else "auto")
        for a in algos:
            if (spec.name, coll, n, a) in self._curves:
                return self._curves[(spec.name, coll, n, a)].time_s(s)
        counts = [(k[2], k[3]) for k in self._curves if k[0] == spec.name and k[1] == coll and k[3] in algos]
        if counts:
            m, a = min(counts, key=lambda c: (abs(c[0] - n), -c[0], algos.index(c[1])))
            return self._time(coll, s * bus_factor(coll, n) / bus_factor(coll, m), spec, m, a)
        return self._transfer(coll, s, spec, n, algo)

    def _largest_n(self, spec: GpuSpec) -> int:
        ns = [k[2] for k in self._curves if k[0] == spec.name]
        if not ns:
            ns = [k[2] for k in self._curves]
        return max(ns)

    def reference_gpu(self, gpu: str | GpuSpec) -> GpuSpec:
        """The calibrated GPU type whose curves stand in for an uncalibrated ``gpu``: same NVLS
        capability if any has it, then the nearest NVLink bandwidth (log ratio), then the name."""
        spec = get_gpu(gpu)
        refs = {get_gpu(k[0]) for k in self._curves}
        refs.discard(spec)
        if not refs:
            raise ConfigError("gpu", "has no intra-server curve and no other GPU type is calibrated",
                              spec.name)
        same = [r for r in refs if r.nvls == spec.nvls] or list(refs)
        return min(same, key=lambda r: (abs(math.log(r.nvlink_bytes_per_s / spec.nvlink_bytes_per_s)), r.name))

    def _transfer(self, coll: str, s: np.ndarray, spec: GpuSpec, n: int, algo: str):
        ref = self.reference_gpu(spec)
        # A non-NVLS target takes the reference's ring curve.
        ref_algo = "ring" if (ref.nvls and not spec.nvls) else algo
        t_ref = self._time(coll, s, ref, n, ref_algo)
        t_lat = self._time(coll, np.zeros_like(s), ref, n, ref_algo)
        return t_lat + (t_ref - t_lat) * ref.nvlink_bytes_per_s / spec.nvlink_bytes_per_s


@functools.lru_cache(maxsize=1)
def default_model() -> IntraServerModel:
    """The model with the shipped parameters (fitted on the sweeps of published.yaml)."""
    text = resources.files("mvopt").joinpath(DEFAULT_PARAMS).read_text()
    return IntraServerModel(_curves_from_data(yaml.safe_load(text), f"mvopt/{DEFAULT_PARAMS}"))


# ----------------------------------------------------------------------------------------------
# calibration from nccl-tests logs

_NCCL_TESTS_NAMES = {"all_reduce": "all_reduce", "all_gather": "all_gather",
                     "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all",
                     "sendrecv": "send_recv"}


@dataclass(frozen=True)
class Measured:
    """Measured points of one curve key, merged over logs (median time per size)."""

    gpu: str
    collective: str
    gpus: int
    algorithm: str
    sizes_bytes: np.ndarray = field(repr=False)
    times_s: np.ndarray = field(repr=False)
    sources: tuple[str, ...] = ()

    def fit(self) -> Curve:
        return fit_curve(self.sizes_bytes, self.times_s, gpu=self.gpu, collective=self.collective,
                         gpus=self.gpus, algorithm=self.algorithm, source=", ".join(self.sources))


def group_nccl_sweeps(sweeps: Sequence[Any], *, gpu: str | None = None, collective: str | None = None,
                      gpus: int | None = None, algorithm: str = "auto",
                      placement: str = "in-place") -> list[Measured]:
    """Merge parsed nccl-tests tables (:class:`mvopt.comm.nccl_tests.NcclSweep`) by curve key.

    ``gpu``, ``collective`` and ``gpus`` override what the logs say (and are needed where a log
    does not say it); ``algorithm`` labels the curves (set it to what NCCL_ALGO forced).
    """
    groups: dict[tuple[str, str, int], dict[float, list[float]]] = {}
    sources: dict[tuple[str, str, int], list[str]] = {}
    for sw in sweeps:
        name = collective or sw.collective
        if name is None:
            raise InputFileError(sw.file, sw.line, "the log does not name its collective (no '# "
                                 "Collective test starting' line): pass --collective")
        coll = _NCCL_TESTS_NAMES.get(name, name)
        if coll not in COLLECTIVES:
            raise InputFileError(sw.file, sw.line, f"collective {name!r} is not modelled (supported: "
                                 f"{', '.join(_NCCL_TESTS_NAMES)})")
        n = gpus or sw.nranks
        if n is None:
            raise InputFileError(sw.file, sw.line, "the log lists no '#  Rank' lines: pass --gpus")
        gname = gpu or sw.gpu_name
        if gname is None:
            raise InputFileError(sw.file, sw.line, "the log names no single GPU type: pass --gpu")
        try:
            spec = get_gpu(gname, path="--gpu")
        except ConfigError as e:
            raise InputFileError(sw.file, sw.line, f"{e} (pass --gpu with a known or user-defined GPU)") from None
        key = (spec.name, coll, int(n))
        bucket = groups.setdefault(key, {})
        for pt in sw.points:
            if pt.size_bytes > 0:
                bucket.setdefault(float(pt.size_bytes), []).append(pt.time_us(placement) * 1e-6)
        sources.setdefault(key, []).append(sw.file)
    out = []
    for key, pts in groups.items():
        sizes = np.array(sorted(pts))
        times = np.array([float(np.median(pts[s])) for s in sizes])
        out.append(Measured(key[0], key[1], key[2], algorithm, sizes, times,
                            tuple(dict.fromkeys(sources[key]))))
    return out
