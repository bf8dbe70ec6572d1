"""How a switch's window runs (CPU backend): its event selection (scan, trees, rescan), and
the switch lanes (port by port) against the serial loop (the GPU graph kernel's schedule):
the same results, the same shared-buffer state, every pool slot in one place.
"""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.engine import simulate
from mvopt.testing import scenarios as sc

from engine_cases import differences, incast, switch_pool_places

# the lanes at every window with an arrival (by default a window with few arrivals for its ports runs
# serially, and the small scenarios here have few)
EVERY_WINDOW = {"MV_LANES_PORTS_PER_ARRIVAL": 1024}


def schedule_defines(schedule: str, limits: dict | None = None) -> dict:
    """The kernel defines of a backend running `schedule`: the lanes at every window with an arrival."""
    return {**(limits or {}), **(EVERY_WINDOW if schedule == "lanes" else {})}


def test_switch_event_selection_paths_agree() -> None:
    """A switch finds its next event by a scan of cached per-port times (few ports), two
    tournament trees over them (more than MV_TREE_PORTS) or, past MV_CACHE_PORTS, by re-reading
    every port; all three must take the same decisions. A build with small limits sends this
    batch's 3-port spines down the first path, its 4- and 5-port switches (fat-tree, torus) down
    the second and its 6-port leaves down the third; the default build scans for all of them."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import extract_results

    exps = sc.mixed_experiments(12)
    default = simulate(exps, backend="cpu")
    batch = build_batch(exps)
    small = CpuBackend(defines={"MV_CACHE_PORTS": 5, "MV_TREE_PORTS": 3})
    res = extract_results(batch, small.run(batch))
    for a, b in zip(default, res):
        assert a.same_as(b), f"{a.name}: " + "; ".join(differences(a, b))
    degrees = {int(d) for e in exps for d in np.diff(e.topology.node_port_offset)[e.topology.n_host:]}
    assert degrees == {3, 4, 5, 6}      # every path taken (the limits above are 3 and 5)


@pytest.mark.parametrize("net", [{}, {"pfc": {"enabled": False}, "buffer_mb": 2}])
def test_switch_lanes_keep_the_shared_buffer_state_of_the_serial_loop(net: dict) -> None:
    """A window run port by port (the switch lanes) keeps the MMU's state: the ingress bytes by
    lane-safe adds, then node_shared_used and node_data_bytes once at the window's end, by the
    change of each ingress port's bytes (above the reserve, for the shared ones). In a 4-to-1 incast with a deep queue (32 MB buffers: shared bytes in use, far from
    the pause threshold, so the windows run port by port), stopped mid-way, every switch's
    buffer state, port records and counters equal the serial loop's after as many windows (the
    queues' slot indices may differ), and node_shared_used is the sum of the ingress ports'
    bytes above the reserve. Without PFC and with 2 MB buffers (7
    senders: the MMU puts bytes above the dynamic threshold into the headroom even then), the
    state is the serial loop's too."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import exp_int
    from mvopt.engine.schema import NPI, PI

    exp = incast("none", 400_000, n=7 if net else 4, **net)
    state = {}
    for lanes, schedule in ((1, "lanes"), (0, "serial")):
        batch = build_batch([exp])
        CpuBackend(switch_schedule=schedule, defines=schedule_defines(schedule)).run(batch, max_iters=80 if net else 60)
        state[lanes] = {k: batch.cols[k].copy() for k in ("port_in", "port_tx", "port_qmax", "node_shared_used",
                                                           "node_data_bytes", "node_ctr", "port_head")}
    cols = batch.cols
    switch = np.flatnonzero(cols["node_is_host"] == 0)
    assert (state[1]["node_shared_used"][switch] > 0).any()      # shared bytes in use mid-way
    for k in state[0]:
        assert np.array_equal(state[0][k], state[1][k]), k
    if not net:   # (headroom in use breaks the identity: its bytes are not shared)
        above = np.maximum(state[1]["port_in"].reshape(-1, NPI)[:, PI["in_bytes"]] - int(exp_int(cols, "reserve")[0]), 0)
        per_node = np.bincount(cols["port_node"], weights=above, minlength=cols["node_is_host"].size)
        assert np.array_equal(per_node[switch], state[1]["node_shared_used"][switch])


@pytest.mark.parametrize("every", [True, False], ids=["every-window", "default"])
@pytest.mark.parametrize("limits", [{}, {"MV_CACHE_PORTS": 5, "MV_TREE_PORTS": 3}], ids=["scan", "trees"])
def test_switch_lanes_give_the_serial_loops_results(limits: dict, every: bool) -> None:
    """Switch windows run port by port where no decision depends on the order of their ports'
    events (the switch lanes; the incast's PFC windows run serially) give the results of the
    serial loop for every window (switch_schedule 'serial', the GPU graph kernel's), over mixed
    experiments (ECMP paths from f_path and spraying, several topologies) and a DCQCN incast (ECN
    marks), also where small cache limits put the serial windows on the tree and rescan paths; with
the lanes at every window with an arrival, and with the default (light windows serial)."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import SWITCH_SCHEDULES, CpuBackend
    from mvopt.engine.batch import extract_results

    exps = [*sc.mixed_experiments(8), incast("dcqcn", 200_000)]
    runs = []
    for schedule in SWITCH_SCHEDULES:
        batch = build_batch(exps)
        defines = schedule_defines(schedule, limits) if every else limits
        runs.append(extract_results(batch, CpuBackend(defines=defines, switch_schedule=schedule).run(batch)))
    assert (batch.cols["f_path"] >= 0).any()
    assert runs[0][-1].counters["ecn_marks"] > 0
    for a, b in zip(*runs):
        assert a.same_as(b), f"{a.name}: " + "; ".join(differences(a, b))


def test_wide_switches_run_port_by_port_with_the_serial_results() -> None:
    """Switches wider than MV_TREE_PORTS (the rail switches of rail-optimised clusters: 16 and 32
    ports) run their windows port by port too, up to MV_LANE_PORTS (32); their serial windows
    keep caches from one window to the next, which a window run port by port leaves stale, so
    the next serial one refills them. Rail clusters of 8 and 16 servers (ECMP and spraying, DCQCN)
    and a 16-to-1 incast with PFC through a 17-port switch (windows port by port, then serial
    once the queue builds, then port by port again): the serial loop's results, with the rail
    switches' windows run port by port (their ports' own pool lists hold slots mid-way)."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import extract_results

    exps = [sc.rail_allreduce("dcqcn", "ecmp"), sc.rail_allreduce("none", "spray"),
            sc.rail_allreduce("dcqcn", "ecmp", 16), incast("dcqcn", 300_000, n=16)]
    runs = []
    for schedule in ("lanes", "serial"):
        batch = build_batch(exps)
        runs.append(extract_results(batch, CpuBackend(switch_schedule=schedule,
                                                      defines=schedule_defines(schedule)).run(batch)))
    for a, b in zip(*runs):
        assert a.same_as(b), f"{a.name}: " + "; ".join(differences(a, b))
    probe = build_batch(exps[2:3])
    CpuBackend(defines=EVERY_WINDOW).run(probe, max_iters=40)
    cols = probe.cols
    width = cols["node_port_hi"] - cols["node_port_lo"]
    pools = cols["port_pool"].reshape(-1, 2)
    rails = np.flatnonzero((cols["node_is_host"] == 0) & (width == 32))
    assert rails.size and sum(int(pools[cols["node_port_lo"][v]:cols["node_port_hi"][v], 1].sum()) for v in rails) > 0


@pytest.mark.parametrize("schedule", ["lanes", "serial"])
def test_switch_pool_slots_are_each_in_one_place(schedule: str) -> None:
    """Every pool slot a switch has drawn (node_pool_next - its first) is, between windows, in
    exactly one place: the switch's free list, one of its ports' own lists (the slots its windows
    run port by port free: the switch lanes, docs/engine.md), or a port's queue; mid-way through a
    4-to-1 incast with a deep queue and through the all-reduce of (a). With the lanes, the ports'
    lists hold slots (their windows ran port by port); with the serial schedule, they are empty."""
    from mvopt.bench import allreduce_config
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.schema import PKT_DTYPE
    from mvopt.build import build_experiment

    for exp, windows in ((incast("none", 400_000, n=4), 60), (build_experiment(allreduce_config("none", 2**20)), 150)):
        batch = build_batch([exp])
        pool_lo = batch.cols["node_pool_next"].copy()
        CpuBackend(switch_schedule=schedule, defines=schedule_defines(schedule)).run(batch, max_iters=windows)
        assert batch.scratch is not None                      # stopped mid-way: its slots are on the batch
        cols, pkt = batch.cols, batch.scratch["pkt"].view(PKT_DTYPE)
        in_ports = 0
        for v in np.flatnonzero(cols["node_is_host"] == 0):
            places = switch_pool_places(cols, pkt, int(v))
            every = places["free"] + places["ports"] + places["queues"]
            assert sorted(every) == list(range(int(pool_lo[v]), int(cols["node_pool_next"][v]))), f"switch {v}"
            in_ports += len(places["ports"])
        assert (in_ports > 0) == (schedule == "lanes")


def test_serial_windows_take_the_ports_slots_last() -> None:
    """A switch whose windows ran port by port holds the slots they freed on its ports' lists;
    its serial windows take from them once its own list and its never-used slots are empty
    (pool_alloc), so that a full pool drops exactly what the serial loop drops. A 4-to-1 incast
    whose switch pool holds only the slots the lanes drew in its first 20 windows (the queue
    still grows then: packets are dropped later), run port by port for those 20 windows (then
    the never-used slots and the switch's list are empty, its ports' lists not), then serially to
    its end: the results of the serial loop all along with the same pool, drops included."""
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import extract_results

    first = 20
    probe = build_batch([incast("none", 400_000, n=4)])
    lo = probe.cols["node_pool_next"].copy()
    CpuBackend(switch_schedule="lanes", defines=EVERY_WINDOW).run(probe, max_iters=first)
    switch = int(np.flatnonzero(probe.cols["node_is_host"] == 0)[0])
    exp = incast("none", 400_000, n=4, switch_packet_slots=int(probe.cols["node_pool_next"][switch] - lo[switch]))
    serial = build_batch([exp])
    want = extract_results(serial, CpuBackend(switch_schedule="serial").run(serial))[0]
    batch = build_batch([exp])
    CpuBackend(switch_schedule="lanes", defines=EVERY_WINDOW).run(batch, max_iters=first)
    cols = batch.cols
    assert cols["node_pool_next"][switch] == cols["node_pool_hi"][switch] and cols["node_pool_free"][switch] < 0
    ports = slice(int(cols["node_port_lo"][switch]), int(cols["node_port_hi"][switch]))
    assert cols["port_pool"].reshape(-1, 2)[ports, 1].sum() > 0
    got = extract_results(batch, first + CpuBackend(switch_schedule="serial").run(batch))[0]
    assert want.counters["data_packets_dropped"] > 0
    assert got.same_as(want), "; ".join(differences(got, want))
