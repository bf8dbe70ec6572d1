"""Model features compiled into the GPU kernels only for the batches that use them.

A feature's code stays in one place in the kernels, behind ``uses_<name>(c, e)``: whether
experiment e uses it, read from one slot of its integer parameters (schema.EI). Each feature
belongs to a compile-time switch, ``MV_FEAT_<SWITCH>`` (0 or 1), and ``uses_<name>`` is false,
and the feature's code dead, when its switch is 0. Both are generated from FEATURES
(kernel_source inlines them), and a batch's switches are computed from the same slots
(`batch_features`): a batch with an experiment that uses a feature gets its switch, so results
cannot depend on the build. The GPU compiles one module per set of switches a batch needs, so
that a batch runs no code of features it does not use; the CPU keeps one build with every
feature (docs/decisions/0028-features-compiled-per-batch.md). Features share a switch, so that
there are few builds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mvopt._cfg.algorithms import LOAD_BALANCERS, congestion_control
from mvopt.engine import schema

__all__ = ["FEATURES", "SWITCHES", "Feature", "batch_features", "c_feature_source", "check_features",
           "feature_options"]


@dataclass(frozen=True)
class Feature:
    """A model feature the kernels compile in only where a batch uses it: experiment e uses it
    when its integer parameter `slot` (schema.EI) is `value` (or, with `nonzero`, is not 0).
    `switch`: the compile-time switch it is compiled in with (MV_FEAT_<SWITCH>)."""

    name: str          # uses_<name> in the kernels
    switch: str
    slot: str          # one of schema.EI
    value: int = 0
    nonzero: bool = False
    doc: str = ""

    @property
    def macro(self) -> str:
        return switch_macro(self.switch)

    def used(self, slot_values: np.ndarray) -> np.ndarray:
        """Per experiment (its value of `slot`): whether it uses the feature."""
        return slot_values != 0 if self.nonzero else slot_values == self.value

    def c_test(self) -> str:
        return f"EI(c, e, EI_{self.slot.upper()}) {'!= 0' if self.nonzero else f'== {self.value}'}"


def switch_macro(switch: str) -> str:
    return f"MV_FEAT_{switch.upper()}"


# One switch for the features few experiments use. Selective repeat, the transport of every
# experiment that sprays, is always compiled in: it costs the kernels few spills (decisions/0028).
FEATURES: tuple[Feature, ...] = (
    Feature("adaptive", "rare", "spray", LOAD_BALANCERS.index("adaptive"),
            doc="adaptive routing (network.lb adaptive)"),
    Feature("flowlet", "rare", "flowlet_ps", nonzero=True,
            doc="adaptive routing per flowlet (network.flowlet_gap_ns)"),
    Feature("timely", "rare", "cc", congestion_control("timely").code, doc="TIMELY (network.cc timely)"),
    Feature("link_down", "rare", "down_n", nonzero=True, doc="links going down (cluster.link_down)"),
)
# the switches, as compiler macros, in FEATURES' order
SWITCHES: tuple[str, ...] = tuple(dict.fromkeys(f.macro for f in FEATURES))


def batch_features(cols: dict[str, np.ndarray]) -> dict[str, int]:
    """The switches (each of SWITCHES -> 0 or 1) a batch's columns need: 1 where an experiment
    uses one of the switch's features."""
    ei = cols["exp_i"].reshape(-1, schema.NEXP_I)
    out = dict.fromkeys(SWITCHES, 0)
    for f in FEATURES:
        out[f.macro] |= int(f.used(ei[:, schema.EI.index(f.slot)]).any())
    return out


def check_features(cols: dict[str, np.ndarray], compiled: dict[str, int]) -> None:
    """AssertionError unless a build with the switches `compiled` has every feature the batch's
    experiments use (a run on a build without one would give other results: a bug)."""
    missing = [name for name, on in batch_features(cols).items() if on and not compiled.get(name, 1)]
    if missing:
        raise AssertionError(f"a batch that needs {', '.join(missing)} on kernels compiled without it")


def feature_options(switches: dict[str, int]) -> tuple[str, ...]:
    """The compiler options that set the switches (every one named, in SWITCHES' order)."""
    if set(switches) != set(SWITCHES) or any(v not in (0, 1) for v in switches.values()):
        raise ValueError(f"feature switches {switches}: expected 0 or 1 for each of {', '.join(SWITCHES)}")
    return tuple(f"-D{m}={switches[m]}" for m in SWITCHES)


def c_feature_source() -> str:
    """The switches' defaults (1: a build not told otherwise has every feature, the CPU's) and
    the kernels' `uses_<name>(c, e)` predicates; after the EI accessor (mv_common.cuh)."""
    out = [f"#ifndef {m}\n#define {m} 1\n#endif\n" for m in SWITCHES]
    for f in FEATURES:
        out.append(f"// {f.doc}\n"
                   f"MV_DEV bool uses_{f.name}(const Ctx* c, int64_t e) {{ return {f.macro} && {f.c_test()}; }}\n")
    return "".join(out)
