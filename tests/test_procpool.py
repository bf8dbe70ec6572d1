"""Pool sizing: the cores a process may use."""

from __future__ import annotations

import os

import pytest

from mvopt.procpool import usable_cores


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_usable_cores_follow_the_affinity() -> None:
    assert usable_cores() == len(os.sched_getaffinity(0))
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)
