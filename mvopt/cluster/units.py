"""Exact unit conversions: link rates to integer bits/s, delays to integer picoseconds.

Floats from the configuration are read through their shortest decimal form (``repr``), so that
``0.1`` ns means exactly 100 ps; a value that is not a whole number of bits/s or picoseconds is
rejected rather than rounded. The HPCC text format writes rates such as ``100Gbps`` and delays
such as ``0.001ms``; :func:`parse_rate` and :func:`parse_delay` read them exactly.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["exact", "gbps_to_bps", "ns_to_ps", "parse_rate", "parse_delay", "format_rate", "format_delay",
           "RATE_UNITS", "DELAY_UNITS"]

RATE_UNITS: dict[str, int] = {"Gbps": 10**9, "Mbps": 10**6, "Kbps": 10**3, "kbps": 10**3, "bps": 1}
DELAY_UNITS: dict[str, int] = {"s": 10**12, "ms": 10**9, "us": 10**6, "ns": 10**3}

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RATE_RE = re.compile(rf"^({_NUMBER})({'|'.join(RATE_UNITS)})$")
_DELAY_RE = re.compile(rf"^({_NUMBER})({'|'.join(sorted(DELAY_UNITS, key=len, reverse=True))})$")


def exact(value: float | int | str) -> Fraction:
    """The exact rational value of a number as written (floats through their shortest repr)."""
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def _whole(x: Fraction) -> int | None:
    return int(x) if x.denominator == 1 else None


def gbps_to_bps(gbps: float) -> int | None:
    """Gb/s to integer bits/s; None when the result is not a whole number of bits/s."""
    return _whole(exact(gbps) * 10**9)


def ns_to_ps(ns: float) -> int | None:
    """Nanoseconds to integer picoseconds; None when not a whole number of picoseconds."""
    return _whole(exact(ns) * 1000)


def parse_rate(text: str) -> int:
    """``"100Gbps"`` → 100_000_000_000 bits/s. Raises ValueError with a user-facing reason."""
    m = _RATE_RE.match(text)
    if not m:
        raise ValueError(f"cannot parse rate {text!r} (expected a number with unit "
                         f"{'/'.join(u for u in RATE_UNITS if u != 'kbps')}, e.g. 100Gbps)")
    bps = exact(m.group(1)) * RATE_UNITS[m.group(2)]
    if bps <= 0:
        raise ValueError(f"rate {text!r} must be > 0")
    if bps.denominator != 1:
        raise ValueError(f"rate {text!r} is not a whole number of bits/s")
    return int(bps)


def parse_delay(text: str) -> int:
    """``"0.001ms"`` → 1_000_000 ps. Raises ValueError with a user-facing reason."""
    m = _DELAY_RE.match(text)
    if not m:
        raise ValueError(f"cannot parse delay {text!r} (expected a number with unit s/ms/us/ns, "
                         "e.g. 0.001ms)")
    ps = exact(m.group(1)) * DELAY_UNITS[m.group(2)]
    if ps < 0:
        raise ValueError(f"negative delay {text!r}")
    if ps.denominator != 1:
        raise ValueError(f"delay {text!r} is not a whole number of picoseconds")
    return int(ps)


def format_rate(bps: int) -> str:
    """Integer bits/s in the largest HPCC unit that keeps it whole (``100Gbps``)."""
    for unit in ("Gbps", "Mbps", "Kbps"):
        if bps % RATE_UNITS[unit] == 0:
            return f"{bps // RATE_UNITS[unit]}{unit}"
    return f"{bps}bps"


def format_delay(ps: int) -> str:
    """Integer picoseconds as an exact HPCC delay (``1000ns``, ``0.5ns`` for 500 ps)."""
    if ps % 1000 == 0:
        return f"{ps // 1000}ns"
    whole, frac = divmod(ps, 1000)
    return f"{whole}.{frac:03d}".rstrip("0") + "ns"
