"""Task graphs: the work of one experiment, as columns (what the engine's Schedule system runs).

A task is a network ``flow`` (src host -> dst host, bytes) or a ``delay`` (a fixed duration on
one host: compute, or an analytically modelled transfer). A task is ready when all its
predecessors finished (see docs/engine.md for the exact rule) and not before ``start_ps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from mvopt.errors import ConfigError
from mvopt.sizes import TASK_BYTES, check_size

__all__ = ["TaskGraph", "TaskGraphBuilder", "FLOW", "DELAY"]

FLOW = 0
DELAY = 1


@dataclass(frozen=True)
class TaskGraph:
    """Columns of one experiment's task DAG. Predecessors are a CSR (``pred_offset``, ``pred``)."""

    kind: np.ndarray          # int8: FLOW or DELAY
    src: np.ndarray           # int32: flow source host (delay: its host)
    dst: np.ndarray           # int32: flow destination host (delay: its host)
    size_bytes: np.ndarray    # int64: flow size (delay: 0)
    duration_ps: np.ndarray   # int64: delay duration (flow: 0)
    start_ps: np.ndarray      # int64: earliest start
    pred_offset: np.ndarray   # int64[n+1]
    pred: np.ndarray          # int32: predecessor task ids
    category: np.ndarray = field(default=None)  # type: ignore[assignment]  # int16 label id (breakdowns)
    categories: tuple[str, ...] = ()
    # set by a builder whose graphs are acyclic by construction (the training builder, whose tests
    # check it): validate() then skips the cycle check, which costs a pass per level of the DAG
    # (9,000 levels, 24 s for the 32-million-task graph of a 17,920-GPU training experiment)
    acyclic: bool = False

    @property
    def n(self) -> int:
        return int(self.kind.shape[0])

    @property
    def start_node(self) -> np.ndarray:
        """Host where each task starts (flow: src)."""
        return self.src

    @property
    def finish_node(self) -> np.ndarray:
        """Host where each task finishes (flow: dst, delay: its host)."""
        return self.dst

    def preds_of(self, t: int) -> np.ndarray:
        return self.pred[self.pred_offset[t]:self.pred_offset[t + 1]]

    def _forward_only(self) -> bool:
        """Whether every task's predecessors have lower ids: then the ids are a topological order
        and there is no cycle (one comparison per dependency; what TaskGraphBuilder produces when
        tasks are added after their predecessors, as every builder of this project does). Other
        graphs (an explicit task list may name later tasks) get Kahn's check."""
        owner = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.pred_offset))
        return bool((self.pred < owner).all())

    def validate(self, n_host: int, where: str = "workload") -> None:
        """Check ids, sizes and acyclicity; raise ConfigError naming the offending task. A graph
        that passed for `n_host` hosts is not checked again (graphs are not changed after
        building; a generation's batch often holds one graph many times)."""
        if self.__dict__.get("_valid_for") == n_host:
            return
        n = self.n
        for name, col in (("src", self.src), ("dst", self.dst)):
            bad = np.nonzero((col < 0) | (col >= n_host))[0]
            if bad.size:
                t = int(bad[0])
                raise ConfigError(f"{where}.tasks[{t}].{name}", f"must be a host id in 0..{n_host - 1}",
                                  int(col[t]))
        flows = self.kind == FLOW
        bad = np.nonzero(flows & (self.size_bytes <= 0))[0]
        if bad.size:
            t = int(bad[0])
            raise ConfigError(f"{where}.tasks[{t}].bytes", "must be > 0", int(self.size_bytes[t]))
        bad = np.nonzero(flows & (self.src == self.dst))[0]
        if bad.size:
            t = int(bad[0])
            raise ConfigError(f"{where}.tasks[{t}].dst", "must differ from src", int(self.dst[t]))
        if self.pred.size and (self.pred.min() < 0 or self.pred.max() >= n):
            raise ConfigError(f"{where}.tasks", "predecessor ids must be task ids", int(self.pred.max()))
        if not self.acyclic and not self._forward_only() and topological_order(self) is None:
            done = np.zeros(n, bool)
            done[_kahn(self)] = True
            t = int(np.nonzero(~done)[0][0])
            raise ConfigError(f"{where}.tasks[{t}].after", "must not form a dependency cycle (this task "
                              "depends on itself through its predecessors)", [int(x) for x in self.preds_of(t)])
        object.__setattr__(self, "_valid_for", n_host)


def topological_order(g: TaskGraph) -> np.ndarray | None:
    """Kahn's algorithm over the CSR; None when there is a cycle."""
    out = _kahn(g)
    return out if len(out) == g.n else None


def _kahn(g: TaskGraph) -> np.ndarray:
    """The tasks Kahn's algorithm can order (all of them unless there is a cycle), level by level:
    each round takes every task whose predecessors are all ordered (numpy over the level, so a
    graph of millions of tasks orders in a number of rounds equal to its depth)."""
    n = g.n
    indeg = np.diff(g.pred_offset).astype(np.int64)
    succ_count = np.bincount(g.pred, minlength=n) if g.pred.size else np.zeros(n, np.int64)
    succ_off = np.zeros(n + 1, np.int64)
    np.cumsum(succ_count, out=succ_off[1:])
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.pred_offset))
    succ = owner[np.argsort(g.pred, kind="stable")]
    level = np.nonzero(indeg == 0)[0]
    out = []
    while level.size:
        out.append(level)
        lo, hi = succ_off[level], succ_off[level + 1]
        lens = hi - lo
        if not lens.sum():
            break
        # successors of the whole level: succ[lo_i : hi_i] for every task i of the level
        idx = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(int(lens.sum()))
        s = succ[idx]
        np.subtract.at(indeg, s, 1)
        cand = np.unique(s)
        level = cand[indeg[cand] == 0]
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


class TaskGraphBuilder:
    """Append tasks one by one (or in bulk) and freeze into a :class:`TaskGraph`.

    Single tasks go to Python lists; a bulk append (:meth:`flows`) first turns those into array
    chunks, then appends its own arrays as chunks, so that a collective's hundreds of thousands of
    flows never become Python objects (building a topology-space experiment spent a third of its
    time converting arrays to lists and back)."""

    # the columns, and the type each is kept in until build()
    _TYPES = {"kind": np.int8, "src": np.int64, "dst": np.int64, "size": np.int64, "dur": np.int64,
              "start": np.int64, "npred": np.int64, "pred": np.int64, "cat": np.int16}

    def __init__(self) -> None:
        self._lists: dict[str, list[int]] = {k: [] for k in self._TYPES}     # single tasks not yet chunked
        self._chunks: dict[str, list[np.ndarray]] = {k: [] for k in self._TYPES}
        self._chunked = 0                                                     # tasks in the chunks
        self._categories: dict[str, int] = {}

    def __len__(self) -> int:
        return self._chunked + len(self._lists["kind"])

    def _category(self, name: str) -> int:
        return self._categories.setdefault(name, len(self._categories))

    def flow(self, src: int, dst: int, size_bytes: int, *, after: Iterable[int] = (), start_ps: int = 0,
             category: str = "flow") -> int:
        """Add a flow task; returns its id."""
        return self._add(FLOW, src, dst, size_bytes, 0, start_ps, after, category)

    def delay(self, node: int, duration_ps: int, *, after: Iterable[int] = (), start_ps: int = 0,
              category: str = "delay") -> int:
        """Add a delay task on ``node``; returns its id."""
        return self._add(DELAY, node, node, 0, duration_ps, start_ps, after, category)

    def _add(self, kind: int, src: int, dst: int, size: int, dur: int, start: int,
             after: Iterable[int], category: str) -> int:
        lists = self._lists
        lists["kind"].append(kind)
        lists["src"].append(int(src))
        lists["dst"].append(int(dst))
        lists["size"].append(int(size))
        lists["dur"].append(int(dur))
        lists["start"].append(int(start))
        n = len(lists["pred"])
        lists["pred"].extend(int(a) for a in after)
        lists["npred"].append(len(lists["pred"]) - n)
        lists["cat"].append(self._category(category))
        return len(self) - 1

    def _to_chunks(self) -> None:
        """The single tasks so far as one chunk per column."""
        n = len(self._lists["kind"])
        if not n:
            return
        check_size("its task graph's tasks", self._chunked + n, TASK_BYTES, "workload")
        for k, t in self._TYPES.items():
            self._chunks[k].append(np.asarray(self._lists[k], t))
            self._lists[k] = []
        self._chunked += n

    def flows(self, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray, pred_count: np.ndarray,
              pred: np.ndarray, *, category: str = "flow") -> int:
        """Add ``len(src)`` flow tasks at once (the same as calling :meth:`flow` for each in turn);
        flow ``i`` waits for the next ``pred_count[i]`` ids of ``pred``. Returns the first id (the
        others follow)."""
        self._to_chunks()
        first, n = len(self), len(src)
        check_size("its task graph's tasks", first + n, TASK_BYTES, "workload")
        columns = {"kind": np.full(n, FLOW), "src": src, "dst": dst, "size": size_bytes, "dur": np.zeros(n),
                   "start": np.zeros(n), "npred": pred_count, "pred": pred,
                   "cat": np.full(n, self._category(category))}
        for k, values in columns.items():
            self._chunks[k].append(np.array(values, self._TYPES[k]))      # a copy: the caller's arrays stay theirs
        self._chunked += n
        return first

    def build(self) -> TaskGraph:
        self._to_chunks()
        col = {k: np.concatenate(c) if c else np.zeros(0, self._TYPES[k]) for k, c in self._chunks.items()}
        off = np.zeros(col["npred"].size + 1, np.int64)
        np.cumsum(col["npred"], out=off[1:])
        return TaskGraph(
            kind=col["kind"], src=_int32(col["src"], "src"), dst=_int32(col["dst"], "dst"),
            size_bytes=col["size"], duration_ps=col["dur"], start_ps=col["start"],
            pred_offset=off, pred=_int32(col["pred"], "predecessor"), category=col["cat"],
            categories=tuple(sorted(self._categories, key=self._categories.get)))


def _int32(values: np.ndarray, what: str) -> np.ndarray:
    """`values` as int32, refusing what does not fit (as converting Python ints would)."""
    if values.size and (values.min() < -2**31 or values.max() >= 2**31):
        raise OverflowError(f"task graph: a {what} id does not fit in 32 bits")
    return values.astype(np.int32)
