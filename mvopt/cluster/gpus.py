"""GPU types: peak throughput, memory capacity and bandwidth, NVLink bandwidth.

The built-in types (A100, H100, H200) take their numbers from ``mvopt/data/published.yaml``
(section ``gpus``), so that one file holds every published figure. A few facts not in that file
come from NVIDIA's data sheets and are listed in :data:`_DATASHEET` below. A user-defined GPU is a
mapping with the same fields as a ``gpus`` entry of ``published.yaml``.

>>> get_gpu("H100").hbm_bytes / 2**30
80.0
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping

import yaml

from mvopt.errors import ConfigError

__all__ = ["GpuSpec", "get_gpu", "gpu_from_dict", "builtin_gpus", "load_published"]

# Facts not in published.yaml (NVIDIA A100 / H100 / H200 data sheets): streaming multiprocessors,
# whether the NVSwitch does in-switch reductions (NVLink SHARP, "NVLS"), and other names the same
# GPU goes by (short names and what nvidia-smi / nccl-tests print). H200 has no measured
# ``max_matmul_efficiency`` in published.yaml; it has the H100's compute die and clocks, so it
# inherits the H100's value (``matmul_efficiency_from``).
_DATASHEET: dict[str, dict[str, Any]] = {
    "A100-SXM4-80GB": {"sm_count": 108, "nvls": False,
                       "aliases": ["A100", "A100-80GB", "A100-SXM4", "NVIDIA A100-SXM4-80GB"]},
    "H100-SXM5-80GB": {"sm_count": 132, "nvls": True,
                       "aliases": ["H100", "H100-SXM5", "H100-SXM", "NVIDIA H100 80GB HBM3",
                                   "NVIDIA H100-SXM5-80GB"]},
    "H200-SXM-141GB": {"sm_count": 132, "nvls": True, "matmul_efficiency_from": "H100-SXM5-80GB",
                       "aliases": ["H200", "H200-SXM", "NVIDIA H200", "NVIDIA H200-SXM-141GB"]},
}

_REQUIRED = ("bf16_tflops", "hbm_GB", "hbm_TBps", "nvlink_GBps_per_direction")
_OPTIONAL = ("fp8_tflops", "max_matmul_efficiency", "sm_count", "nvls", "aliases")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type. Units are in the field names (bytes, FLOP/s, bytes/s)."""

    name: str
    peak_bf16_flops: float                 # dense bf16 tensor-core peak, FLOP/s
    hbm_bytes: int                         # HBM capacity (the data-sheet "GB" read as GiB, as nvidia-smi shows)
    hbm_bytes_per_s: float                 # HBM bandwidth
    nvlink_bytes_per_s: float              # NVLink bandwidth per direction per GPU
    peak_fp8_flops: float | None = None
    max_matmul_efficiency: float | None = None   # best large-GEMM fraction of peak (measured)
    sm_count: int | None = None
    nvls: bool = False                     # NVSwitch in-switch reduction (NCCL's NVLS algorithm)
    aliases: tuple[str, ...] = field(default=())

    @property
    def matmul_efficiency(self) -> float:
        """Best achievable fraction of peak for large GEMMs (1.0 when unknown)."""
        return 1.0 if self.max_matmul_efficiency is None else self.max_matmul_efficiency


def gpu_from_dict(name: str, spec: Mapping[str, Any], *, path: str = "gpu") -> GpuSpec:
    """A GPU from a mapping with the fields of a ``gpus`` entry of published.yaml.

    Required: ``bf16_tflops``, ``hbm_GB`` (GiB), ``hbm_TBps``, ``nvlink_GBps_per_direction``;
    optional: ``fp8_tflops``, ``max_matmul_efficiency``, ``sm_count``, ``nvls``, ``aliases``.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(path, "must be a mapping of GPU fields", spec)
    unknown = sorted(set(spec) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}", "unknown GPU field (known: "
                          f"{', '.join(_REQUIRED + _OPTIONAL)})", show_value=False)
    for key in _REQUIRED:
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{path}.{key}", "is required and must be a number > 0", value)
    eff = spec.get("max_matmul_efficiency")
    if eff is not None and not (isinstance(eff, (int, float)) and 0 < eff <= 1):
        raise ConfigError(f"{path}.max_matmul_efficiency", "must be in (0, 1]", eff)
    fp8 = spec.get("fp8_tflops")
    sms = spec.get("sm_count")
    return GpuSpec(
        name=name,
        peak_bf16_flops=float(spec["bf16_tflops"]) * 1e12,
        hbm_bytes=int(round(float(spec["hbm_GB"]) * 2**30)),
        hbm_bytes_per_s=float(spec["hbm_TBps"]) * 1e12,
        nvlink_bytes_per_s=float(spec["nvlink_GBps_per_direction"]) * 1e9,
        peak_fp8_flops=None if fp8 is None else float(fp8) * 1e12,
        max_matmul_efficiency=None if eff is None else float(eff),
        sm_count=None if sms is None else int(sms),
        nvls=bool(spec.get("nvls", False)),
        aliases=tuple(spec.get("aliases", ())),
    )


@functools.lru_cache(maxsize=1)
def load_published() -> dict[str, Any]:
    """The parsed ``mvopt/data/published.yaml`` (cached; do not mutate)."""
    text = resources.files("mvopt").joinpath("data/published.yaml").read_text()
    return yaml.safe_load(text)


@functools.lru_cache(maxsize=1)
def builtin_gpus() -> dict[str, GpuSpec]:
    """The built-in GPU types by their published name."""
    published = load_published()["gpus"]
    out: dict[str, GpuSpec] = {}
    for name, spec in published.items():
        extra = dict(_DATASHEET.get(name, {}))
        donor = extra.pop("matmul_efficiency_from", None)
        merged = {**spec, **extra}
        if donor is not None and "max_matmul_efficiency" not in merged:
            merged["max_matmul_efficiency"] = published[donor]["max_matmul_efficiency"]
        out[name] = gpu_from_dict(name, merged, path=f"published.yaml: gpus.{name}")
    return out


def _key(name: str) -> str:
    return name.strip().lower()


def get_gpu(gpu: str | GpuSpec | Mapping[str, Any], *,
            user_gpus: Mapping[str, Mapping[str, Any]] | None = None, path: str = "cluster.gpu") -> GpuSpec:
    """Look a GPU up by published name, short name (A100, H100, H200) or nvidia-smi name.

    ``gpu`` may also be a :class:`GpuSpec` (returned as is) or a mapping defining a GPU
    (see :func:`gpu_from_dict`). ``user_gpus`` maps extra names to such mappings; they are
    searched first. Unknown names raise :class:`ConfigError` listing the known ones.
    """
    if isinstance(gpu, GpuSpec):
        return gpu
    if isinstance(gpu, Mapping):
        return gpu_from_dict(str(gpu.get("name", "custom")),
                             {k: v for k, v in gpu.items() if k != "name"}, path=path)
    if not isinstance(gpu, str):
        raise ConfigError(path, "must be a GPU name or a mapping of GPU fields", gpu)
    for name, spec in (user_gpus or {}).items():
        if _key(name) == _key(gpu):
            return gpu_from_dict(name, spec, path=f"{path}[{name}]")
    for spec in builtin_gpus().values():
        if _key(gpu) in {_key(spec.name), *(_key(a) for a in spec.aliases)}:
            return spec
    known = [*(user_gpus or {}), *(s for g in builtin_gpus().values() for s in (g.name, g.aliases[0]))]
    raise ConfigError(path, f"must be a known GPU ({', '.join(known)}) or a user-defined GPU", gpu)
