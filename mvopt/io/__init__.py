"""Readers and writers of other simulators' file formats.

>>> from mvopt.io import read_hpcc_flows, read_hpcc_config, write_fct  # doctest: +SKIP

:mod:`mvopt.io.hpcc`: the HPCC ns-3 simulator's flow.txt, config.txt and fct.txt (its topology
format is read by :func:`mvopt.cluster.read_hpcc_topology`). docs/simulate.md describes them.
"""

from mvopt.io.hpcc import (CC_MODES, HpccConfigWarning, HpccFlow, HpccSettings, add_hpcc_flows, format_fct,
                           node_ip, parse_data_rate, read_hpcc_config, read_hpcc_flows, sports, write_fct)

__all__ = ["CC_MODES", "HpccConfigWarning", "HpccFlow", "HpccSettings", "add_hpcc_flows", "format_fct", "node_ip",
           "parse_data_rate", "read_hpcc_config", "read_hpcc_flows", "sports", "write_fct"]
