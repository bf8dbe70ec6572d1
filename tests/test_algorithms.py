"""Each enumeration of algorithms is declared once (mvopt/_cfg/algorithms.py): the configuration,
the CLI, the HPCC-format reader, the engine's codes and the kernels' C enum all follow it."""

from __future__ import annotations

import argparse
import re
from typing import get_args, get_type_hints

import pytest

from mvopt._cfg.algorithms import (CC_NAMES, COLLECTIVE_ALGORITHMS, CONGESTION_CONTROLS, LOAD_BALANCERS,
                                   congestion_control)
from mvopt.config import CollectiveConfig, NetworkConfig, load_config


def test_codes_are_positions_and_names_are_unique() -> None:
    assert [c.code for c in CONGESTION_CONTROLS] == list(range(len(CONGESTION_CONTROLS)))
    assert len(set(CC_NAMES)) == len(CC_NAMES)
    assert all(congestion_control(c.name) is c for c in CONGESTION_CONTROLS)


def test_the_configuration_allows_exactly_the_declared_values() -> None:
    net, coll = get_type_hints(NetworkConfig), get_type_hints(CollectiveConfig)
    assert get_args(net["cc"]) == CC_NAMES
    assert get_args(net["lb"]) == LOAD_BALANCERS
    assert get_args(coll["algorithm"]) == COLLECTIVE_ALGORITHMS
    for c in CONGESTION_CONTROLS:
        assert load_config({"network": {"cc": c.name}}).network.resolved_window is c.windowed


def test_the_engine_codes_and_the_kernels_enum_are_the_declared_ones() -> None:
    from mvopt.engine.params import CC_CODES
    from mvopt.engine.source import kernel_source

    assert CC_CODES == {c.name: c.code for c in CONGESTION_CONTROLS}
    for backend in ("cpu", "cuda"):
        defined = dict(re.findall(r"\bCC_([A-Z0-9_]+) = (\d+)", kernel_source(backend)))
        assert defined == {c.name.upper(): str(c.code) for c in CONGESTION_CONTROLS}   # once, generated


def test_hpcc_cc_modes_map_to_the_declared_algorithms(tmp_path) -> None:
    from mvopt.errors import InputFileError
    from mvopt.io.hpcc import CC_MODES, read_hpcc_config

    assert CC_MODES == {c.hpcc_cc_mode: c.name for c in CONGESTION_CONTROLS if c.hpcc_cc_mode is not None}
    for mode, name in CC_MODES.items():
        path = tmp_path / f"config{mode}.txt"
        path.write_text(f"CC_MODE {mode}\n")
        assert read_hpcc_config(path, host_rate_bps=100 * 10**9).overrides["network.cc"] == name
    # the HPCC simulator's TIMELY is not mvopt's (docs/decisions/0150-timely.md): refused
    assert congestion_control("timely").hpcc_cc_mode is None
    path = tmp_path / "timely.txt"
    path.write_text("CC_MODE 7\n")
    with pytest.raises(InputFileError, match=r"CC_MODE 7 \(TIMELY\) is not supported \(supported: 1 = DCQCN, "
                                             r"3 = HPCC, 8 = DCTCP\)"):
        read_hpcc_config(path, host_rate_bps=100 * 10**9)


def test_the_bench_cli_accepts_every_algorithm_and_only_those() -> None:
    from mvopt.commands.bench import _ccs

    assert _ccs(",".join(CC_NAMES)) == list(CC_NAMES)
    with pytest.raises(argparse.ArgumentTypeError,
                       match="congestion control must be none, dcqcn, hpcc, dctcp or timely, got 'swift'"):
        _ccs("swift")
