"""Collective communication: inter-server collectives as network flows (:mod:`~mvopt.comm.collectives`,
:mod:`~mvopt.comm.tree`, :mod:`~mvopt.comm.hierarchical`), the calibrated intra-server model and the
nccl-tests log parser.
"""

from mvopt.comm.intra import (ALGORITHMS, COLLECTIVES, Curve, IntraServerModel, Regime, bus_factor,
                              default_model, dump_params, fit_curve, group_nccl_sweeps, load_params,
                              published_sweeps)
from mvopt.comm.nccl_tests import NcclPoint, NcclSweep, parse_nccl_tests, read_nccl_tests

__all__ = ["ALGORITHMS", "COLLECTIVES", "Curve", "IntraServerModel", "Regime", "bus_factor",
           "default_model", "dump_params", "fit_curve", "group_nccl_sweeps", "load_params",
           "published_sweeps", "NcclPoint", "NcclSweep", "parse_nccl_tests", "read_nccl_tests"]
