"""The batch layout: what the backends rely on (serialization shortcut, packet-slot placement,
which columns results are read from). Ring and pool sizes: test_capacity.py."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder, build_batch, get_backend
from mvopt.engine import schema
from mvopt.engine.batch import INF_PS, RESULT_COLUMNS, extract_results, gpu_report_columns
from mvopt.engine.params import Experiment, ser_ps
from mvopt.engine.sizing import ps_per_byte, scratch_nbytes


def _exp(cc: str, n: int = 6, size: int = 60_000, limit_ps: int = 10 * 10**12) -> Experiment:
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": cc}})
    g = TaskGraphBuilder()
    for i in range(n):
        g.flow(i, (i + 5) % 16, size + 1000 * i)
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), name=cc,
                      time_limit_ps=limit_ps)


def test_serialization_by_multiplication_is_exact_where_used() -> None:
    rates = np.array([10**11, 2 * 10**11, 4 * 10**11, 25 * 10**9, 3 * 10**9 + 7, 56 * 10**9], np.int64)
    ppb = ps_per_byte(rates)
    for r, k in zip(rates, ppb):
        for b in (1, 64, 1500, 9000):
            if k:
                assert b * int(k) == ser_ps(b, int(r))
    assert ppb[4] == 0                        # 8e12 is not a multiple of 3,000,000,007 b/s


def test_int_records_only_for_hpcc_slots() -> None:
    mixed = build_batch([_exp("dcqcn"), _exp("hpcc"), _exp("none")])
    hpcc_only = build_batch([_exp("hpcc")])
    assert mixed.counts["n_int"] == hpcc_only.counts["n_int"]
    assert build_batch([_exp("dcqcn")]).counts["has_int"] == 0
    assert mixed.nbytes == sum(a.nbytes for a in mixed.cols.values()) + scratch_nbytes(mixed.counts)
    assert "pkt" not in mixed.cols       # scratch: each backend allocates it where the kernels run


def test_results_read_only_the_result_columns() -> None:
    """A backend copies back RESULT_COLUMNS only: garbling every other state column after the
    run must not change any result (including the diagnostics of unfinished experiments)."""
    exps = [_exp("dcqcn"), _exp("hpcc"), _exp("none", size=10**7, limit_ps=50 * 10**6)]   # the last times out
    batch = build_batch(exps)
    iters = get_backend("cpu").run(batch, chunk_iters=40)
    before = extract_results(batch, iters)
    for col in schema.COLUMNS:
        if col.doc.startswith("state") and col.name not in RESULT_COLUMNS:
            batch.cols[col.name][...] = np.frombuffer(np.random.default_rng(1).bytes(batch.cols[col.name].nbytes),
                                                      batch.cols[col.name].dtype).reshape(batch.cols[col.name].shape)
    after = extract_results(batch, iters)
    assert [r.status for r in before] == ["done", "done", "timeout"]
    assert all(a.same_as(b) and a.diagnostic == b.diagnostic for a, b in zip(before, after))


def test_gpu_reports_follow_from_the_state_of_a_run_stopped_on_the_cpu() -> None:
    """The GPU's report columns, which the CPU does not keep, derived from a batch: as built
    before any window, and after a CPU run stopped midway the finished tasks and acknowledged
    flows of each experiment (counted from the task and flow columns) and its window count, so
    that the GPU continues where the CPU stopped (the GPU half: test_engine's stopped-run test)."""
    exps = [_exp("dcqcn", n=2, size=5_000), _exp("none", n=6, size=100_000)]
    built = build_batch(exps)
    for name, values in gpu_report_columns(built.cols).items():
        assert np.array_equal(values, built.cols[name]), name
    batch = build_batch(exps)
    get_backend("cpu").run(batch, max_iters=24)
    cols, derived = batch.cols, gpu_report_columns(batch.cols)
    status = [r.status for r in extract_results(batch, 24)]
    assert status[0] == "done" and status[1] != "done"       # one finished, one stopped midway
    task_exp = np.repeat(np.arange(2), [len(e.tasks.kind) for e in exps])
    finished = np.bincount(task_exp[cols["task_finish_ps"] < INF_PS], minlength=2)
    acked = np.bincount(task_exp[cols["f_task"]][cols["f_done_ps"] >= 0], minlength=2)
    assert 0 < finished[1] < len(exps[1].tasks.kind)
    assert derived["exp_done"].tolist() == finished.tolist()
    assert derived["exp_acked"].tolist() == acked.tolist()
    assert derived["node_iter"].tolist() == cols["exp_iter"][cols["node_exp"]].tolist()


def test_zero_columns_are_zero_in_every_row() -> None:
    """The GPU sets `Batch.zero_columns` in place instead of copying them, so each must really be
    all zero (a column filled after it was built must not be listed)."""
    from mvopt.testing.scenarios import mixed_experiments

    for exps in (mixed_experiments(5), mixed_experiments(1)):   # parts written, or adopted
        batch = build_batch(exps)
        assert {"f_cci", "f_ccd", "node_iter"} <= batch.zero_columns
        assert not {"node_pool_next", "node_pool_hi", "node_order", "port_q", "exp_acc_next",
                    "task_finish_ps"} & batch.zero_columns
        # built from parts that were all zero (an empty heap before any task is ready): zero too
        assert "heap_t" in batch.zero_columns
        for name in batch.zero_columns:
            assert not batch.cols[name].any(), name
        for name in set(batch.cols) - batch.zero_columns - {"port_q", "node_rr", "node_pool_free", "exp_acc_next",
                                                            "exp_acc_prog"}:
            if batch.cols[name].size:       # every other column has a non-zero value
                assert batch.cols[name].any(), name


def test_flow_paths_are_computed_once_per_distinct_experiment_with_the_same_rows() -> None:
    """build_batch computes the flows' paths once per experiment that differs in what they depend
    on (batch_flow_paths) and copies them to its equals: the rows are routes.flow_paths' over
    every flow of the batch, in batches with repeated experiments, equal ones but for their CC
    (the same paths) and ones that differ only in their seed (other ECMP hashes)."""
    import dataclasses

    from mvopt.engine import routes, schema
    from mvopt.engine.batch import batch_flow_paths, exp_int
    from mvopt.testing.scenarios import mixed_experiments

    exps = mixed_experiments(6)
    other_cc = dataclasses.replace(exps[0], network=dataclasses.replace(exps[0].network, cc="dctcp"))
    other_seed = dataclasses.replace(exps[0], seed=99)
    batch = build_batch(exps + [exps[0], exps[3], other_cc, other_seed])
    cols = batch.cols
    assert (cols["f_path"] >= 0).any()
    whole = routes.flow_paths(cols, exp_int(cols, "spray"), schema.NPATH)
    assert np.array_equal(cols["f_path"].reshape(whole.shape), whole)
    assert np.array_equal(batch_flow_paths(cols, batch.spans), whole)
    rows = [whole[sp.flow_lo:sp.flow_hi] for sp in batch.spans]
    assert np.array_equal(rows[0], rows[6]) and np.array_equal(rows[0], rows[8])   # repeated; other CC
    assert not np.array_equal(rows[0], rows[9])                                      # other ECMP hashes


def test_packets_larger_than_the_record_allows_are_a_configuration_error() -> None:
    """The packet record keeps wire bytes in 16 bits: payload + header must stay <= 32767. The
    configuration checks it (tests/test_config.py); the engine checks again a network section
    made in code, which skips the configuration's checks."""
    import dataclasses

    from mvopt.errors import ConfigError

    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}})
    g = TaskGraphBuilder()
    g.flow(0, 5, 100_000)
    net = dataclasses.replace(cfg.network, payload_bytes=32767)
    exp = Experiment(topology=build_topology(cfg.cluster), network=net, tasks=g.build())
    with pytest.raises(ConfigError, match="network.payload_bytes"):
        exp.params


def test_node_orders_are_permutations_grouped_by_kind() -> None:
    """The GPU's node orders (results do not depend on them): hosts, then switches by width; or,
    widest first, switches from the widest down, then hosts."""
    from mvopt.engine.batch import node_order
    from mvopt.testing.scenarios import mixed_experiments

    cols = build_batch(mixed_experiments(6)).cols
    ports = cols["node_port_hi"] - cols["node_port_lo"]
    host = cols["node_is_host"] == 1
    for widest in (False, True):
        order = node_order(cols, widest_first=widest)
        assert np.array_equal(np.sort(order), np.arange(order.size))
        key = np.where(host[order], 1 if widest else 0, -ports[order] if widest else 1 + ports[order])
        assert (np.diff(key) >= 0).all()
    first = node_order(cols, widest_first=True)[0]
    assert not host[first] and ports[first] == ports[~host].max()



def test_an_empty_batch_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="no experiments"):
        build_batch([])


def test_a_timeout_says_the_limit_passed_where_the_report_says_it_simulated_to() -> None:
    """A link so slow that the next event lies past the limit: the result's end is the limit,
    and the diagnostic says the limit passed instead of 'timeout at t = 0'."""
    from mvopt.build import build_experiment
    from mvopt.config import load_config
    from mvopt.engine import simulate

    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4, "link_gbps": [1e-9]},
                       "workload": {"kind": "collective"}, "collective": {"op": "all_reduce", "bytes": 65536},
                       "simulation": {"time_limit_ms": 100}})
    (r,) = simulate([build_experiment(cfg)], backend="cpu")
    assert r.status == "timeout" and r.end_ps == 100 * 10**9
    assert r.diagnostic.startswith("status timeout: the time limit of 100 ms passed")
