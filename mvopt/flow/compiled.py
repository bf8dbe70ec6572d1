"""The flow level's code compiled for the host, loaded with ctypes: its event loop (``loop.cpp``),
its ECMP walk (``walk.cpp``) and its other passes over every dependency or path entry (the
batch's columns, the bytes each port carried: ``columns.cpp``).

The library is built once by the host C++ compiler (the packet engine's: ``$CXX`` or g++) with
the packet engine's flags (no contraction, no fast math: the same IEEE operations as the array
path) and -O3, and cached under ``$MVOPT_CACHE`` by the hash of the source and the command. It
runs one experiment per thread, OpenMP over the batch's experiments.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from mvopt.engine.cxx import FLAGS, compiler, openmp_works, shared_library
from mvopt.engine.params import PS_PER_S
from mvopt.errors import BackendUnavailable
from mvopt.flow.batch import FlowBatch
from mvopt.flow.paths import WEIGHT_ONE
from mvopt.flow.sim import FlowState
from mvopt.procpool import usable_cores

__all__ = ["ecmp_walk", "flow_latency", "library", "pack_paths", "port_bytes_carried", "run_batch_compiled",
           "successors"]

SOURCES = tuple(Path(__file__).with_name(name) for name in ("loop.cpp", "walk.cpp", "columns.cpp"))

# FlowCtx's fields in loop.cpp's order: (name, ctypes type, the batch column's dtype or None)
_I64, _I8, _F64 = np.int64, np.int8, np.float64
_PARAMS = (
    ("exp_task_lo", _I64), ("exp_flow_lo", _I64), ("exp_port_lo", _I64), ("exp_limit_ps", _I64),
    ("task_is_flow", _I8), ("task_duration_ps", _I64), ("task_min_ps", _I64), ("task_npred", _I64),
    ("task_flow", _I64), ("succ_offset", _I64), ("succ", _I64), ("succ_notify_ps", _I64),
    ("flow_task", _I64), ("flow_bits", _F64), ("flow_latency_ps", _I64),
    ("path_offset", _I64), ("path_port", _I64), ("path_weight", _I64), ("path_is_data", _I8),
    ("port_cap", _I64),
)
# (name, dtype, row kind: its length is the batch's number of tasks, flows or experiments)
_STATE = (("task_start_ps", _I64, "task"), ("task_finish_ps", _I64, "task"), ("flow_end_ps", _I64, "flow"),
          ("exp_T_ps", _I64, "exp"), ("exp_steps", _I64, "exp"), ("exp_status", _I8, "exp"))
_CTYPE = {_I64: ctypes.POINTER(ctypes.c_int64), _I8: ctypes.POINTER(ctypes.c_int8),
          _F64: ctypes.POINTER(ctypes.c_double)}


class _FlowCtx(ctypes.Structure):
    _fields_ = ([("n_exp", ctypes.c_int64), ("weight_one", ctypes.c_int64)]
                + [(name, _CTYPE[dt]) for name, dt in _PARAMS]
                + [(name, _CTYPE[dt]) for name, dt, _ in _STATE])


@lru_cache(maxsize=1)
def library() -> tuple[ctypes.CDLL, bool]:
    """The compiled library (built on first use, then cached on disk) and whether its loop runs
    threads."""
    cxx = compiler()
    openmp = openmp_works(cxx)
    # -O3: the per-transfer loops vectorised (no contraction, no fast math: the same IEEE operations)
    flags = [*FLAGS, "-O3", *(["-fopenmp"] if openmp else [])]
    source = "\n".join(path.read_text() for path in SOURCES)
    lib = shared_library(source, "mvopt_flow", "the flow level's library", cxx, flags)
    dll = ctypes.CDLL(str(lib))
    dll.mv_flow_run.restype = None
    dll.mv_flow_run.argtypes = [ctypes.POINTER(_FlowCtx), ctypes.c_int64]
    dll.mv_flow_sizeof_ctx.restype = ctypes.c_int64
    for name in ("mv_flow_walk", "mv_flow_pack", "mv_flow_successors", "mv_flow_latency", "mv_flow_port_bytes"):
        getattr(dll, name).restype = None
    dll.mv_flow_walk.argtypes = [ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * 3, ctypes.c_int64,
                                 *[ctypes.c_void_p] * 9]
    dll.mv_flow_pack.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                 *[ctypes.c_void_p] * 3, ctypes.c_int64, *[ctypes.c_void_p] * 4]
    dll.mv_flow_successors.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 4, ctypes.c_int64, *[ctypes.c_void_p] * 3]
    dll.mv_flow_latency.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 8, ctypes.c_int64, ctypes.c_int64,
                                    *[ctypes.c_void_p] * 2]
    dll.mv_flow_port_bytes.argtypes = [ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * 4, ctypes.c_int64,
                                       *[ctypes.c_void_p] * 2]
    if dll.mv_flow_sizeof_ctx() != ctypes.sizeof(_FlowCtx):
        raise BackendUnavailable("loop.cpp's FlowCtx differs from compiled._FlowCtx (a bug)")
    return dll, openmp


def _threads(n_exp: int, threads: int | None) -> int:
    env = os.environ.get("OMP_NUM_THREADS", "")
    most = threads or (int(env) if env.isdigit() and int(env) > 0 else usable_cores())
    return max(1, min(most, n_exp))


def run_batch_compiled(batch: FlowBatch, threads: int | None = None) -> FlowState:
    """Simulate every experiment of `batch` to its end on the host's cores (`threads` at most:
    default $OMP_NUM_THREADS, else every usable core). The same FlowState as
    :func:`mvopt.flow.sim.run_batch`, bit for bit, as NumPy arrays."""
    dll, openmp = library()
    rows = {"task": batch.task_exp.size, "flow": batch.flow_task.size, "exp": batch.n_exp}
    keep = {name: np.ascontiguousarray(getattr(batch, name), dtype=dt) for name, dt in _PARAMS}
    state = {name: np.empty(rows[kind], dt) for name, dt, kind in _STATE}
    ctx = _FlowCtx(n_exp=batch.n_exp, weight_one=WEIGHT_ONE,
                   **{name: a.ctypes.data_as(_CTYPE[a.dtype.type]) for name, a in {**keep, **state}.items()})
    dll.mv_flow_run(ctypes.byref(ctx), _threads(batch.n_exp, threads) if openmp else 1)
    return FlowState(state["task_start_ps"], state["task_finish_ps"], state["flow_end_ps"], state["exp_T_ps"],
                     state["exp_status"], state["exp_steps"])


def _ptr(a: np.ndarray, dtype: type) -> int:
    """The address of `a`, which must be C-contiguous of `dtype` (the callers' arrays are)."""
    if a.dtype != dtype or not a.flags.c_contiguous:
        raise ValueError(f"an array of {a.dtype} where the compiled code takes contiguous {np.dtype(dtype)} (a bug)")
    return a.ctypes.data


def ecmp_walk(ids: np.ndarray, start: np.ndarray, end: np.ndarray, n_host: int, node_port_lo: np.ndarray,
              port_peer_node: np.ndarray, ecmp_prefix: np.ndarray, tables: tuple[np.ndarray, np.ndarray],
              switches: int, lost: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One way of every flow (int64 columns) through dense routing tables (walk.cpp's
    mv_flow_walk): [flows, 1 + switches] ports, the source host's first, then each switch's
    egress, -1 after the last; the ports of each row, and whether its walk reached its end.
    `lost` (int8, per flow) is read and set as routes.flow_paths' (a flow lost is not walked;
    one that reaches another host than its end is cleared and lost)."""
    dll, _ = library()
    n = int(ids.size)
    ports = np.empty((n, 1 + switches), np.int64)
    count = np.empty(n, np.int64)
    reached = np.empty(n, np.int8)
    rtab, rtab_nh = (np.ascontiguousarray(t, np.int32) for t in tables)
    dll.mv_flow_walk(n, 1 + switches, _ptr(ids, _I64), _ptr(start, _I64), _ptr(end, _I64), n_host,
                     _ptr(node_port_lo, _I64), _ptr(port_peer_node, _I64), _ptr(ecmp_prefix, np.uint64),
                     _ptr(rtab, np.int32), _ptr(rtab_nh, np.int32), _ptr(ports, _I64), _ptr(count, _I64),
                     _ptr(reached, _I8), _ptr(lost, _I8))
    return ports, count, reached.astype(bool)


def pack_paths(data: np.ndarray, data_count: np.ndarray, ack: np.ndarray, ack_count: np.ndarray,
               ack_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(offset, port, weight, is_data): every flow's entries, its data ports (`data`'s rows,
    `data_count` of each) at weight WEIGHT_ONE then its ACK ports at `ack_weight` (walk.cpp's
    mv_flow_pack)."""
    dll, _ = library()
    n = int(data_count.size)
    offset = np.zeros(n + 1, np.int64)
    np.cumsum(data_count + ack_count, out=offset[1:])
    total = int(offset[-1])
    port, weight, is_data = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.int8)
    dll.mv_flow_pack(n, data.shape[1], _ptr(data, _I64), _ptr(data_count, _I64), ack.shape[1], _ptr(ack, _I64),
                     _ptr(ack_count, _I64), _ptr(ack_weight, _I64), WEIGHT_ONE, _ptr(offset, _I64), _ptr(port, _I64),
                     _ptr(weight, _I64), _ptr(is_data, _I8))
    return offset, port, weight, is_data.view(bool)


def successors(g, window_ps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(succ_offset, succ, succ_notify_ps) of task graph `g` (FlowBatch's columns: each task's
    successors in the order of their dependency entries, and the window where a successor starts
    on another host than the one its predecessor finishes on; columns.cpp's mv_flow_successors)."""
    dll, _ = library()
    if g.n >= 2**31:
        raise ValueError(f"a task graph of {g.n:,} tasks: the flow level takes at most 2**31 - 1")
    pred_offset = np.ascontiguousarray(g.pred_offset, np.int64)
    pred, src, dst = (np.ascontiguousarray(a, np.int32) for a in (g.pred, g.src, g.dst))
    succ_offset = np.empty(g.n + 1, np.int64)
    succ, notify = np.empty(pred.size, np.int64), np.empty(pred.size, np.int64)
    dll.mv_flow_successors(g.n, _ptr(pred_offset, _I64), _ptr(pred, np.int32), _ptr(src, np.int32),
                           _ptr(dst, np.int32), int(window_ps), _ptr(succ_offset, _I64), _ptr(succ, _I64),
                           _ptr(notify, _I64))
    return succ_offset, succ, notify


def flow_latency(paths, first_wire: np.ndarray, rate: np.ndarray, delay: np.ndarray,
                 ack_hop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each flow's latency and its last ACK's way back (FlowBatch's flow_latency_ps and
    flow_ack_ps) from its entries (`paths`, FlowPaths), its first packet's wire bytes and the
    ports' rates, delays and ACK hop times (columns.cpp's mv_flow_latency)."""
    dll, _ = library()
    n = int(paths.offset.size - 1)
    latency, ack = np.empty(n, np.int64), np.empty(n, np.int64)
    is_data = np.ascontiguousarray(paths.is_data).view(np.int8)
    dll.mv_flow_latency(n, _ptr(paths.offset, _I64), _ptr(paths.port, _I64), _ptr(paths.weight, _I64),
                        _ptr(is_data, _I8), _ptr(np.ascontiguousarray(first_wire, np.int64), _I64),
                        _ptr(rate, _I64), _ptr(delay, _I64), _ptr(ack_hop, _I64), PS_PER_S, WEIGHT_ONE,
                        _ptr(latency, _I64), _ptr(ack, _I64))
    return latency, ack


def port_bytes_carried(batch: FlowBatch, flow_bytes: np.ndarray) -> np.ndarray:
    """The bytes each port of `batch` carried (int64, rounded): every entry's flow's bytes
    (`flow_bytes`, float64 per flow) times its weight of WEIGHT_ONE, summed per port
    (columns.cpp's mv_flow_port_bytes)."""
    dll, _ = library()
    n_port = int(batch.port_cap.size)
    total, out = np.empty(n_port, np.float64), np.empty(n_port, np.int64)
    offset, port, weight = (np.ascontiguousarray(a, np.int64) for a in (batch.path_offset, batch.path_port,
                                                                        batch.path_weight))
    dll.mv_flow_port_bytes(int(batch.flow_task.size), n_port, _ptr(offset, _I64), _ptr(port, _I64),
                           _ptr(weight, _I64), _ptr(np.ascontiguousarray(flow_bytes, np.float64), _F64), WEIGHT_ONE,
                           _ptr(total, _F64), _ptr(out, _I64))
    return out
