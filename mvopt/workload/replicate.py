"""Build a task graph once per distinct schedule and replicate it with numpy.

A :class:`Part` records tasks like the engine's ``TaskGraphBuilder`` (same ``flow``/``delay``
signatures, so :mod:`mvopt.comm` algorithms can write into it), but its hosts are *slots*
(``0..n_slot-1``) and a predecessor id may be an *anchor* (``-1 - a``): a task outside the part,
supplied per copy. :class:`Assembly` places ``R`` copies of a frozen part at once: copy ``r``
gets task ids ``base[r] + local id``, hosts ``hostmap[r, slot]`` and anchors ``anchors[r, a]``
(``-1``: no dependency). :meth:`Assembly.build` returns the columns of the whole graph (the
fields of :class:`mvopt.engine.TaskGraph`; this module does not import the engine).

Everything per copy is an array operation, so a part of ``n`` tasks copied ``R`` times costs
``O(R n)`` numpy work and no Python loop over copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

__all__ = ["Part", "FrozenPart", "Assembly", "FLOW", "DELAY"]

FLOW = 0
DELAY = 1


class Part:
    """A task graph template over slots, with anchors for outside predecessors."""

    def __init__(self, n_slot: int, n_anchor: int = 0) -> None:
        self.n_slot = int(n_slot)
        self.n_anchor = int(n_anchor)
        self.kind: list[int] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.size: list[int] = []
        self.dur: list[int] = []
        self.cat: list[str] = []
        self.preds: list[list[int]] = []

    def __len__(self) -> int:
        return len(self.kind)

    @staticmethod
    def anchor(a: int) -> int:
        """The predecessor id standing for anchor ``a``."""
        return -1 - int(a)

    def _add(self, kind: int, src: int, dst: int, size: int, dur: int, after: Iterable[int],
             category: str) -> int:
        self.kind.append(kind)
        self.src.append(int(src))
        self.dst.append(int(dst))
        self.size.append(int(size))
        self.dur.append(int(dur))
        self.cat.append(category)
        self.preds.append([int(a) for a in after])
        return len(self.kind) - 1

    def flow(self, src: int, dst: int, size_bytes: int, *, after: Iterable[int] = (), start_ps: int = 0,
             category: str = "flow") -> int:
        """A flow from slot ``src`` to slot ``dst`` (``start_ps`` must be 0 in a part)."""
        if start_ps:
            raise ValueError("parts have no start times")
        return self._add(FLOW, src, dst, size_bytes, 0, after, category)

    def delay(self, node: int, duration_ps: int, *, after: Iterable[int] = (), start_ps: int = 0,
              category: str = "delay") -> int:
        """A delay on slot ``node``."""
        if start_ps:
            raise ValueError("parts have no start times")
        return self._add(DELAY, node, node, 0, max(0, int(duration_ps)), after, category)

    def add_pred(self, task: int, pred: int) -> None:
        """Add a predecessor to an existing task."""
        self.preds[task].append(int(pred))

    def freeze(self) -> "FrozenPart":
        n = len(self.kind)
        counts = np.fromiter((len(p) for p in self.preds), np.int64, n)
        pred = np.fromiter((a for p in self.preds for a in p), np.int64, int(counts.sum()))
        cats = sorted(set(self.cat))
        index = {c: i for i, c in enumerate(cats)}
        return FrozenPart(
            n_slot=self.n_slot, n_anchor=self.n_anchor,
            kind=np.asarray(self.kind, np.int8), src=np.asarray(self.src, np.int64),
            dst=np.asarray(self.dst, np.int64), size=np.asarray(self.size, np.int64),
            dur=np.asarray(self.dur, np.int64),
            cat=np.fromiter((index[c] for c in self.cat), np.int64, n), categories=tuple(cats),
            p_count=counts, p_owner=np.repeat(np.arange(n, dtype=np.int64), counts),
            p_local=np.where(pred >= 0, pred, -1), p_anchor=np.where(pred < 0, -1 - pred, -1))


@dataclass(frozen=True)
class FrozenPart:
    """Columns of a :class:`Part`; predecessors in task order (``p_owner`` nondecreasing), each
    either local (``p_local``) or an anchor (``p_anchor``), the other -1."""

    n_slot: int
    n_anchor: int
    kind: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    dur: np.ndarray
    cat: np.ndarray
    categories: tuple[str, ...]
    p_count: np.ndarray
    p_owner: np.ndarray
    p_local: np.ndarray
    p_anchor: np.ndarray

    @property
    def n(self) -> int:
        return int(self.kind.size)

    @property
    def e_succ(self) -> np.ndarray:
        return self.p_owner[self.p_local >= 0]

    @property
    def e_pred(self) -> np.ndarray:
        return self.p_local[self.p_local >= 0]


@dataclass
class _Placed:
    part: FrozenPart
    hostmap: np.ndarray            # [R, n_slot]
    base: np.ndarray               # [R]
    anchors: np.ndarray | None = None


@dataclass
class Assembly:
    """Copies of parts, placed one after the other in the task id space."""

    placed: list[_Placed] = field(default_factory=list)
    n_task: int = 0

    def place(self, part: FrozenPart, hostmap: np.ndarray) -> tuple[int, np.ndarray]:
        """Place ``len(hostmap)`` copies of ``part``; returns (handle, base id of each copy)."""
        hostmap = np.asarray(hostmap, np.int64).reshape(-1, part.n_slot)
        r = hostmap.shape[0]
        base = self.n_task + part.n * np.arange(r, dtype=np.int64)
        self.placed.append(_Placed(part, hostmap, base))
        self.n_task += part.n * r
        return len(self.placed) - 1, base

    def set_anchors(self, handle: int, anchors: np.ndarray) -> None:
        """Global task ids of every copy's anchors, shape [R, n_anchor] (-1: no dependency)."""
        p = self.placed[handle]
        a = np.asarray(anchors, np.int64).reshape(p.hostmap.shape[0], p.part.n_anchor)
        p.anchors = a

    def counts(self) -> dict:
        """What :meth:`build` would return, counted without building it (O(templates + anchors)).

        ``tasks``, ``flows``, ``edges`` (dependencies; anchors set to -1 are dropped, as in
        :meth:`build`), ``tasks_by_category`` and ``flow_sizes`` (the distinct flow sizes, which
        size the engine's wire rings). For the engine's remote-predecessor lists:
        ``remote_edges`` / ``remote_owners`` count the dependencies whose predecessor finishes on
        another host than its successor starts on (and the tasks with at least one) among the
        edges inside a copy, exactly; the anchored edges (``anchored_edges``, ``anchored_owners``)
        are not resolved, so the exact totals lie between ``remote_edges`` and ``remote_edges +
        anchored_edges`` (likewise for owners)."""
        out = dict(tasks=0, flows=0, edges=0, remote_edges=0, remote_owners=0, anchored_edges=0,
                   anchored_owners=0)
        by_cat: dict[str, int] = {}
        sizes = []
        for p in self.placed:
            fp, hm = p.part, p.hostmap
            r = hm.shape[0]
            if r == 0 or fp.n == 0:
                continue
            out["tasks"] += r * fp.n
            out["flows"] += r * int((fp.kind == FLOW).sum())
            sizes.append(np.unique(fp.size[fp.kind == FLOW]))
            for c, k in zip(fp.categories, np.bincount(fp.cat, minlength=len(fp.categories)).tolist()):
                by_cat[c] = by_cat.get(c, 0) + r * k
            loc = fp.p_local >= 0
            owner, pred = fp.p_owner[loc], fp.p_local[loc]
            out["edges"] += r * int(loc.sum())
            a_sel = fp.p_anchor >= 0
            if a_sel.any():
                if p.anchors is None:
                    raise ValueError("a placed part with anchored edges has no anchors")
                keep = np.take(p.anchors, fp.p_anchor[a_sel], axis=1) >= 0          # [R, anchored edges]
                out["edges"] += int(keep.sum())
                out["anchored_edges"] += int(keep.sum())
                a_owner = fp.p_owner[a_sel]                                          # nondecreasing
                starts = np.flatnonzero(np.concatenate([[True], a_owner[1:] != a_owner[:-1]]))
                out["anchored_owners"] += int((np.add.reduceat(keep, starts, axis=1) > 0).sum())
            if owner.size == 0:
                continue
            # a local edge is remote when the predecessor's finish host differs from the owner's
            # start host; per copy the hosts are hm[r, slot]
            s_slot, d_slot = fp.src[owner], fp.dst[pred]
            srt = np.sort(hm, axis=1)
            if (srt[:, 1:] != srt[:, :-1]).all():
                rem = s_slot != d_slot                                          # injective copies
                out["remote_edges"] += r * int(rem.sum())
                out["remote_owners"] += r * int(np.unique(owner[rem]).size)
            else:
                starts = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
                step = max(1, (1 << 24) // owner.size)
                for lo in range(0, r, step):
                    h = hm[lo:lo + step]
                    rem = h[:, s_slot] != h[:, d_slot]
                    out["remote_edges"] += int(rem.sum())
                    out["remote_owners"] += int((np.add.reduceat(rem, starts, axis=1) > 0).sum())
        out["tasks_by_category"] = by_cat
        out["flow_sizes"] = np.unique(np.concatenate(sizes)) if sizes else np.zeros(0, np.int64)
        return out

    def build(self) -> dict:
        """The columns of the whole graph (keyword arguments of ``mvopt.engine.TaskGraph``).

        Copies are laid out in id order, and each copy's predecessors in task order, so the CSR is
        the concatenation of every placement's block: no sort. Columns are filled in place."""
        n = self.n_task
        cats: dict[str, int] = {}
        kind = np.empty(n, np.int8)
        src = np.empty(n, np.int32)
        dst = np.empty(n, np.int32)
        size = np.empty(n, np.int64)
        dur = np.empty(n, np.int64)
        cat = np.empty(n, np.int16)
        counts = np.empty(n, np.int64)
        preds: list[np.ndarray] = []
        for p in self.placed:
            fp, hm, base = p.part, p.hostmap, p.base
            r, k = hm.shape[0], fp.n
            if r == 0 or k == 0:
                continue
            lo = int(base[0])
            sl = slice(lo, lo + r * k)
            remap = np.asarray([cats.setdefault(c, len(cats)) for c in fp.categories], np.int16)
            kind[sl].reshape(r, k)[:] = fp.kind
            src[sl].reshape(r, k)[:] = np.take(hm, fp.src, axis=1)
            dst[sl].reshape(r, k)[:] = np.take(hm, fp.dst, axis=1)
            size[sl].reshape(r, k)[:] = fp.size
            dur[sl].reshape(r, k)[:] = fp.dur
            cat[sl].reshape(r, k)[:] = remap[fp.cat]
            cnt = counts[sl].reshape(r, k)
            cnt[:] = fp.p_count
            if fp.p_owner.size == 0:
                continue
            anchored = fp.p_anchor >= 0
            block = np.empty((r, fp.p_owner.size), np.int64)
            loc = ~anchored
            block[:, loc] = base[:, None] + fp.p_local[loc][None, :]
            if anchored.any():
                if p.anchors is None:
                    raise ValueError("a placed part with anchored edges has no anchors")
                block[:, anchored] = np.take(p.anchors, fp.p_anchor[anchored], axis=1)
                keep = block >= 0
                if not keep.all():
                    drop_r, drop_e = np.nonzero(~keep)
                    cnt -= np.bincount(drop_r * k + fp.p_owner[drop_e], minlength=r * k).reshape(r, k)
                    preds.append(block[keep].astype(np.int32))
                    continue
            preds.append(block.ravel().astype(np.int32))
        offset = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=offset[1:])
        pred = np.concatenate(preds) if preds else np.zeros(0, np.int32)
        return dict(kind=kind, src=src, dst=dst, size_bytes=size, duration_ps=dur,
                    start_ps=np.zeros(n, np.int64), pred_offset=offset, pred=pred, category=cat,
                    categories=tuple(sorted(cats, key=cats.get)))

