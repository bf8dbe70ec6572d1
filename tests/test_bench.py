"""mvopt.bench: the speed benchmark's workload and rows."""

from __future__ import annotations

from mvopt.bench import allreduce_config, bench_allreduce, format_table


def test_the_benchmark_experiment_and_its_seed() -> None:
    """Workload (a): a k=4 fat-tree ring all-reduce of 1500-byte packets; `seed` sets the
    simulation seed (ECMP's hashes), which profile_gpu.py varies per experiment."""
    cfg = allreduce_config("dcqcn", 2**20)
    assert (cfg.cluster.k, cfg.network.cc, cfg.network.payload_bytes + cfg.network.header_bytes) == (4, "dcqcn", 1500)
    assert cfg.collective.bytes == 2**20 and cfg.collective.algorithm == "ring"
    assert allreduce_config("none", 2**20, seed=7).simulation.seed == 7
    assert allreduce_config("none", 2**20).simulation.seed == cfg.simulation.seed


def test_rows_count_every_experiment_of_a_batch() -> None:
    """A batch of B identical experiments is B experiments' work: B times the packet-hops and
    windows of one, all done, each with the same makespan."""
    one, three = bench_allreduce([1, 3], ["none"], size_bytes=256 * 1024, backend="cpu")
    assert one.status == three.status == "done" and one.batch == 1 and three.batch == 3
    assert three.packet_hops == 3 * one.packet_hops > 0 and three.windows == 3 * one.windows
    assert three.run_s > 0 and three.makespan_us == one.makespan_us > 0
    table = format_table([one, three])
    assert table.count("\n") == 3 and f"{three.packet_hops:,}" in table


def test_a_space_generation_is_benchmarked_as_its_distinct_configurations() -> None:
    """The optimizer simulates each distinct configuration of a generation once (its duplicates
    are told the same result), so the benchmark simulates those: topology.yaml's 128 trials hold
    far fewer distinct configurations; every feasible trial's configuration is among them."""
    from mvopt.bench import sample_generation, space_path
    from mvopt.optimize import load_space

    configs, sampled, size, feasible = sample_generation("topology", None, 0, {})
    cands = [c for c in load_space(space_path("topology")).sample(size, seed=0) if c.feasible]
    assert sampled == size == 128 and feasible == len(cands)
    keys = {c.key for c in cands}
    assert len(configs) == len(keys) < feasible
    assert configs[0] == cands[0].config     # in the order of their first trial
