"""Exact sizing before anything is built: an experiment's counts and bytes are what the batch holds."""

from __future__ import annotations

from mvopt.engine import build_batch, schema
from mvopt.engine.sizing import batch_bytes, batch_counts, batch_route_counts, experiment_counts
from mvopt.testing.scenarios import mixed_experiments

EXPS = mixed_experiments(9)


def test_counts_and_bytes_are_exactly_what_the_batch_holds() -> None:
    """Exactly, with each topology's dense routing table and each distinct link class counted once
    (batch_route_counts); the planner's plain sum counts one per experiment and one class per
    port, an upper bound."""
    batch = build_batch(EXPS)
    counts = batch_route_counts(EXPS, [experiment_counts(e) for e in EXPS])
    summed = {k: sum(c[k] for c in counts) for k in schema.COUNTS}
    assert batch_counts(summed) == {k: v for k, v in batch.counts.items() if k in schema.COUNTS}
    assert 1 <= batch.counts["n_link"] < sum(experiment_counts(e)["n_link"] for e in EXPS) == batch.counts["n_port"]
    assert batch.counts["n_hop"] == batch.counts["n_flow"]    # HPCC in the mix: hop state for every flow
    assert batch.counts["n_fpath"] == batch.counts["n_flow"] and batch.counts["has_paths"] == 1
    no_hpcc = [e for e in EXPS if e.network.cc != "hpcc"]
    assert build_batch(no_hpcc).counts["n_hop"] == 1
    total = {k: sum(c[k] for c in counts) for k in counts[0]}
    assert batch_bytes(total) == batch.nbytes
    plain = {k: sum(experiment_counts(e)[k] for e in EXPS) for k in counts[0]}
    assert batch_bytes(plain) >= batch.nbytes
