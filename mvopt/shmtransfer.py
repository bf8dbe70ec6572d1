"""Moving large results from worker processes to the main one without copying them twice.

A worker's result (a built experiment: a few MB to hundreds of MB of NumPy arrays) would reach
the main process pickled through a pipe, and the main process alone would unpickle them one after
another, which makes it the bottleneck of a generation built by many workers
(docs/decisions/0010-host-batch-build.md). Instead :func:`pack` writes the arrays' bytes (pickle
protocol 5's out-of-band buffers) to one file in shared memory (``/dev/shm``) and sends only the
small rest through the pipe; :func:`unpack` maps the file (copy-on-write: the arrays stay
writable, no page is copied unless written), unlinks it at once, and rebuilds the object around
those pages. Where shared memory is missing or too small, the result travels pickled through the
pipe.
"""

from __future__ import annotations

import mmap
import os
import pickle
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["Packed", "pack", "unpack", "unpack_all", "sweep_stale", "SHM_DIR", "MIN_SHARED_BYTES", "RECEIVED"]

SHM_DIR = "/dev/shm"
MIN_SHARED_BYTES = 1 << 20       # smaller results travel pickled (a file costs more than it saves;
                                 # $MVOPT_SHM_MIN_BYTES overrides it, for tests)
RECEIVED = {"shared": 0, "pickled": 0}   # how the results unpacked in this process travelled
_PREFIX = "mvopt-transfer-"
_ALIGN = 64
_count = 0


@dataclass(frozen=True)
class Packed:
    """A packed result: `meta` is the pickle (with the buffers left out when `path` is set),
    `spans` the (offset, length) of each buffer in the file at `path`."""

    meta: bytes
    path: str | None = None
    spans: tuple[tuple[int, int], ...] = ()


def pack(obj: Any) -> Packed:
    """`obj` packed for :func:`unpack` in another process (see the module docstring)."""
    global _count
    buffers: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    total = sum(v.nbytes for v in views)
    if not total or total < int(os.environ.get("MVOPT_SHM_MIN_BYTES", MIN_SHARED_BYTES)) or not _room(total):
        return Packed(pickle.dumps(obj, protocol=5))
    _count += 1
    path = os.path.join(SHM_DIR, f"{_PREFIX}{os.getpid()}-{_count}")
    spans, offset = [], 0
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            for v in views:
                pad = -offset % _ALIGN     # each array on its own 64-byte boundary, as NumPy allocates
                if pad:
                    os.write(fd, bytes(pad))
                    offset += pad
                spans.append((offset, v.nbytes))
                done = 0
                while done < v.nbytes:
                    done += os.write(fd, v[done:])
                offset += v.nbytes
        finally:
            os.close(fd)
    except OSError:               # full after all, or gone: the pipe then
        _remove(path)
        return Packed(pickle.dumps(obj, protocol=5))
    return Packed(meta, path, tuple(spans))


def unpack(packed: Packed) -> Any:
    """The object `packed` holds; its shared-memory file (if any) is removed."""
    RECEIVED["shared" if packed.path else "pickled"] += 1
    if packed.path is None:
        return pickle.loads(packed.meta)
    try:
        with open(packed.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) if size else None
    finally:
        _remove(packed.path)      # the mapping outlives the name
    whole = memoryview(mm) if mm is not None else memoryview(b"")
    return pickle.loads(packed.meta, buffers=[whole[o:o + n] for o, n in packed.spans])


def sweep_stale() -> int:
    """Remove the files of processes that no longer run (a main process that died before
    unpacking what its workers sent); returns how many."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return 0
    removed = 0
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        path = os.path.join(SHM_DIR, name)
        pid = name[len(_PREFIX):].partition("-")[0]
        try:
            mine = os.stat(path).st_uid == os.getuid()     # another user's files are theirs to sweep
        except OSError:
            continue
        if mine and pid.isdigit() and not _alive(int(pid)):
            _remove(path)
            removed += 1
    return removed


def unpack_all(packed: Iterable[Packed]) -> list:
    """:func:`unpack` of each, in order; if one fails, the files of the rest are removed
    (the workers keep running, so nothing else would) before the error propagates."""
    it = iter(packed)
    out = []
    try:
        for p in it:
            out.append(unpack(p))
    except BaseException:
        try:
            for p in it:
                if p.path is not None:
                    _remove(p.path)
        except BaseException:      # the rest may not arrive at all (a broken pool)
            pass
        raise
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _room(nbytes: int) -> bool:
    """Whether SHM_DIR exists and has room for `nbytes` with half of it to spare."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize >= 2 * nbytes


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:        # gone already, or not ours to remove
        pass
