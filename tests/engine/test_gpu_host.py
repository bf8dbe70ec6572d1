"""The GPU backend's host loop for the groups launch mode (engine/_gpu.py: first_window,
_run_launches, _groups_launcher) and its one compile (prepare), run without a GPU: a stand-in
for CuPy and for the kernel, which advances each running experiment as the groups kernel would
(to the cap, or by the slices it is given, or less when a launch's budget runs out). The kernels themselves are tested on a GPU (test_gpu_launch.py)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from mvopt.engine import build_batch
from mvopt.engine._gpu import ST_RUN, GpuBackend, first_window
from mvopt.engine.backend_defaults import GPU
from mvopt.testing.scenarios import fat_tree_flows

ST_DONE = 1


class HostArray:
    """A host array in the place of a CuPy one (get, data.ptr, nbytes)."""

    def __init__(self, a) -> None:
        self.a = np.array(a)

    def get(self) -> np.ndarray:
        return self.a.copy()

    @property
    def data(self):
        return SimpleNamespace(ptr=id(self))

    @property
    def nbytes(self) -> int:
        return self.a.nbytes


FAKE_CP = SimpleNamespace(asarray=HostArray, zeros=lambda n, dtype: HostArray(np.zeros(n, dtype)),
                          cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=0),
                                               runtime=SimpleNamespace(memsetAsync=lambda *a: None)))


def backend(status: HostArray, iters: HostArray, lengths: np.ndarray, resident: int, budget_windows: int | None):
    """A GpuBackend whose groups kernel advances every running experiment of the groups it gets
    slices for: to the cap with one slice per group, by `slice` windows per slice with more
    groups than resident blocks; at most `budget_windows` per launch (a budget that runs out)."""
    be = object.__new__(GpuBackend)
    be.cp, be.sms, be._wait = FAKE_CP, 1, lambda: None
    be.defaults = GPU
    be._groups_resident = lambda kernel, threads, smem: resident

    def kernel(grid, block, args, shared_mem=0):
        cap, group_exp, n_groups, slice_windows, n_slices = (int(a) if not isinstance(a, HostArray) else a
                                                             for a in args[:5])
        offsets = group_exp.a
        rounds = n_slices // n_groups
        for g in range(n_groups):
            for e in range(offsets[g], offsets[g + 1]):
                if status.a[e] != ST_RUN:
                    continue
                windows = min(cap - iters.a[e], rounds * slice_windows, budget_windows or cap)
                iters.a[e] += max(0, min(windows, lengths[e] - iters.a[e]))
                if iters.a[e] >= lengths[e]:
                    status.a[e] = ST_DONE
    be.groups_kernel = kernel      # (passed to _groups_launcher as the compiled kernels' would be)
    return be


@pytest.mark.parametrize("resident", [100, 2])
@pytest.mark.parametrize("budget_windows", [None, 5])
@pytest.mark.parametrize("slice_windows", [GPU.group_slice_windows, 64])
def test_a_continued_run_reaches_the_end_of_every_experiment(resident: int, budget_windows: int | None,
                                                             slice_windows: int) -> None:
    """One experiment ended long before the others (a run stopped and continued): the cap rises
    from the running ones, and launches move them to their ends, with one slice per group or
    slices of some windows, with or without budgets that cut launches short."""
    lengths = np.array([15, 1259, 700, 3000, 40])
    status = HostArray([ST_DONE, ST_RUN, ST_RUN, ST_RUN, ST_DONE])
    iters = HostArray([15, 415, 415, 415, 40])
    assert first_window(status.a, iters.a) == 415
    offsets = np.array([0, 2, 3, 5])
    be = backend(status, iters, lengths, resident, budget_windows)
    be.defaults = replace(GPU, group_slice_windows=slice_windows)
    launch, blocks = be._groups_launcher(be.groups_kernel, offsets, 128, status, iters)
    assert blocks == min(resident, 3)
    be._run_launches(launch, status, iters, first_window(status.a, iters.a), 1 << 62, 256, None, 0.0, None)
    assert (status.a == ST_DONE).all() and (iters.a == lengths).all()


def test_the_cap_from_an_ended_experiment_would_stall_the_run() -> None:
    """Why the cap rises from the running experiments: from the ended one's window count, the
    first launch has nothing to do, which the host loop reports as a bug."""
    lengths = np.array([15, 1259])
    status, iters = HostArray([ST_DONE, ST_RUN]), HostArray([15, 415])
    be = backend(status, iters, lengths, 100, None)
    launch, _ = be._groups_launcher(be.groups_kernel, np.array([0, 2]), 128, status, iters)
    with pytest.raises(RuntimeError, match="no progress"):
        be._run_launches(launch, status, iters, 15, 1 << 62, 256, None, 0.0, None)


def test_first_window_of_a_batch_with_nothing_running() -> None:
    assert first_window(np.array([ST_DONE, ST_DONE]), np.array([3, 9])) == 0
    assert first_window(np.array([ST_RUN, ST_DONE, ST_RUN]), np.array([7, 2, 5])) == 5


def test_the_switch_lanes_launch_whole_warps() -> None:
    """Groups packed into 100 threads launch in blocks of 128: the switch lanes take their tasks
    by whole warps (and the kernel traps on a partial one)."""
    lengths = np.array([5, 5])
    status, iters = HostArray([ST_RUN, ST_RUN]), HostArray([0, 0])
    be = backend(status, iters, lengths, 100, None)
    seen = []
    run_groups = be.groups_kernel
    be.groups_kernel = lambda grid, blk, args, shared_mem=0: (seen.append(blk), run_groups(grid, blk, args, shared_mem))
    launch, _ = be._groups_launcher(be.groups_kernel, np.array([0, 1, 2]), 100, status, iters)
    launch(5)
    assert seen == [(128,)] and (status.a == ST_DONE).all()


def test_the_kernels_compile_once_for_every_batch() -> None:
    """GpuBackend.prepare: the kernels, compiled with the backend's NVRTC options on their first
    use and then the same module for any batch (one with a rare feature, TIMELY, too)."""
    compiled = []

    class Module:
        def __init__(self, code: str, options: tuple) -> None:
            compiled.append(options)

        def get_function(self, name: str):
            return SimpleNamespace(name=name, kernel=SimpleNamespace(ptr=0))

        def get_global(self, name: str):
            return name

    be = object.__new__(GpuBackend)
    be.cp = SimpleNamespace(RawModule=Module, cuda=SimpleNamespace(
        Device=lambda d: nullcontext(), driver=SimpleNamespace(occupancyMaxActiveBlocksPerMultiprocessor=lambda *a: 4)))
    be.device, be.sms, be.threads, be.options, be.compiled = 0, 132, 128, ("--fmad=false",), None
    plain = build_batch([fat_tree_flows([(0, 5)], 10_000)])
    timely = build_batch([fat_tree_flows([(0, 5)], 10_000), fat_tree_flows([(0, 5)], 10_000, cc="timely")])
    kernels = be.prepare(plain)
    assert be.prepare(plain) is kernels and be.prepare(timely) is kernels
    assert compiled == [("--fmad=false",)]
    assert kernels.window_resident_blocks == 132 * 4 and kernels.groups.name == "mv_run_groups"
