"""From validated configurations to engine experiments, batched simulation and evaluations.

>>> from mvopt.config import load_config
>>> from mvopt.build import build_experiment, run
>>> cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none"},
...                    "workload": {"kind": "collective"}, "collective": {"bytes": 1 << 20}})
>>> result, = run([cfg])                                   # doctest: +SKIP
>>> result.status, result.makespan_s                       # doctest: +SKIP

* :func:`build_experiment` — one :class:`~mvopt.config.ExperimentConfig` to one
  :class:`~mvopt.engine.Experiment`: the topology from ``cluster``, the task graph from
  ``workload`` (kind ``tasks``: the explicit graph; ``collective``: the flows of
  :mod:`mvopt.comm.collectives` (ring), :mod:`mvopt.comm.tree` or :mod:`mvopt.comm.hierarchical`;
  ``hpcc_flows``: an HPCC flow.txt; ``training``: the per-rank graph of
  :mod:`mvopt.workload.taskgraph`; ``astra``: an ASTRA-sim/SimAI workload, :mod:`mvopt.io.astra`),
  the engine settings from ``network`` and ``simulation``. Invalid input raises ConfigError /
  InputFileError, an invalid parallel layout or a configuration that does not fit in GPU memory
  InfeasibleError, all before any simulation. :func:`build` also returns the training plan
  that :func:`training_report` turns into an iteration time, its breakdown, MFU and memory.
* :func:`run` — build every configuration and simulate them as one SPME batch.
* :func:`evaluate` — the optimizer's evaluator (:mod:`mvopt.evaluation`): configurations
  that cannot be built become infeasible evaluations at no simulation cost, all the others run
  in one batch; the objective of a training workload is its iteration time (with the breakdown
  compute / tp_comm / pp_comm / dp_comm / bubble, and MFU and peak memory in ``sim_stats``), of any
  other workload its makespan in seconds.
"""

from mvopt.build.evaluations import evaluate
from mvopt.build.experiment import Built, build, build_experiment, run, simulate_built, training_report
from mvopt.build.graphs import build_tasks, training_setup
from mvopt.build.parallel import PARALLEL_BUILD_MIN, build_all, build_workers

__all__ = ["build_experiment", "build", "Built", "build_tasks", "run", "evaluate", "training_setup",
           "training_report", "simulate_built", "build_all", "build_workers", "PARALLEL_BUILD_MIN"]
