"""How much memory a configuration may ask to build, checked before the structure is allocated.

A topology, its routing tables and a task graph grow with the configuration (a fat-tree's k³/4
hosts, a collective's steps x chunks flows); a value a few times too large would otherwise grow
the process until the system kills it. Each builder states what it will allocate through
:func:`check_size` first, which refuses it with what, how much, the limit and how to raise it.
"""

from __future__ import annotations

import math
import os

from mvopt.errors import ConfigError, InfeasibleError

__all__ = ["DEFAULT_LIMIT_GIB", "LIMIT_ENV", "TASK_BYTES", "memory_limit_bytes", "check_size"]

DEFAULT_LIMIT_GIB = 8.0
# A lower bound of a task's bytes while a graph is built (its columns as int64 chunks) and once
# built: enough to refuse a graph far too large before its columns are allocated.
TASK_BYTES = 48
LIMIT_ENV = "MVOPT_MEMORY_LIMIT_GIB"


def memory_limit_bytes() -> int:
    """The limit on one structure a build allocates: $MVOPT_MEMORY_LIMIT_GIB, default 8 GiB."""
    raw = os.environ.get(LIMIT_ENV, "")
    if not raw:
        return int(DEFAULT_LIMIT_GIB * 2**30)
    try:
        gib = float(raw)
    except ValueError:
        gib = float("nan")
    if not (math.isfinite(gib) and gib > 0):
        raise ConfigError(LIMIT_ENV, "must be a positive number of GiB", raw)
    return int(gib * 2**30)


def check_size(what: str, count: int, bytes_each: float, where: str) -> None:
    """Refuse (InfeasibleError: a search records the candidate as infeasible) a structure of
    `count` items of at least `bytes_each` bytes when it exceeds the limit; `where` names the
    configuration that asked for it (e.g. ``cluster.k = 2000``)."""
    need = int(count) * float(bytes_each)
    limit = memory_limit_bytes()
    if need > limit:
        raise InfeasibleError(f"{where}: {what} ({int(count):,}) need at least {need / 2**30:,.1f} GiB, "
                              f"over the limit of {limit / 2**30:g} GiB (${LIMIT_ENV} raises it)")
