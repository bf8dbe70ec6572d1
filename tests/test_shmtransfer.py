"""Results moved from worker processes through shared memory (mvopt/shmtransfer.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from mvopt import shmtransfer
from mvopt.shmtransfer import Packed, pack, sweep_stale, unpack, unpack_all

needs_shm = pytest.mark.skipif(not os.path.isdir(shmtransfer.SHM_DIR), reason="no /dev/shm")


def _payload() -> dict:
    rng = np.random.default_rng(0)
    return {"big": rng.integers(0, 2**40, 400_000), "odd": np.arange(7, dtype=np.int8),
            "table": rng.random((300, 200)), "name": "exp", "nested": [np.arange(5), (1, 2.5)]}


@needs_shm
def test_large_results_travel_through_a_file_that_is_removed_on_arrival() -> None:
    obj = _payload()
    packed = pack(obj)
    assert packed.path is not None and os.path.exists(packed.path) and len(packed.meta) < 10_000
    got = unpack(packed)
    assert not os.path.exists(packed.path)
    for key in ("big", "odd", "table"):
        assert np.array_equal(got[key], obj[key]) and got[key].dtype == obj[key].dtype
        assert got[key].flags.writeable and got[key].ctypes.data % 64 == 0   # writable, aligned
    assert got["name"] == "exp" and np.array_equal(got["nested"][0], np.arange(5)) and got["nested"][1] == (1, 2.5)
    got["big"][0] = -1                        # copy-on-write: the writer's data is not shared back
    assert obj["big"][0] != -1


def test_small_results_and_no_shared_memory_travel_pickled(monkeypatch, tmp_path) -> None:
    small = pack({"a": np.arange(10)})
    assert small.path is None and np.array_equal(unpack(small)["a"], np.arange(10))
    monkeypatch.setattr(shmtransfer, "SHM_DIR", str(tmp_path / "missing"))
    packed = pack(_payload())
    assert packed.path is None and np.array_equal(unpack(packed)["big"], _payload()["big"])


def test_files_of_dead_processes_are_swept(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(shmtransfer, "SHM_DIR", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (tmp_path / f"mvopt-transfer-{dead}-1").write_bytes(b"x")
    (tmp_path / f"mvopt-transfer-{os.getpid()}-1").write_bytes(b"x")
    (tmp_path / "other-file").write_bytes(b"x")
    assert sweep_stale() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"mvopt-transfer-{os.getpid()}-1", "other-file"])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_the_sweep_leaves_other_users_files_alone(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(shmtransfer, "SHM_DIR", str(tmp_path))
    theirs = tmp_path / "mvopt-transfer-999999-1"      # a dead pid, another user's file
    theirs.write_bytes(b"x")
    os.chown(theirs, 65534, 65534)
    assert sweep_stale() == 0 and theirs.exists()


@needs_shm
def test_a_failed_unpack_removes_the_files_of_the_results_after_it() -> None:
    first, second, third = pack(_payload()), pack(_payload()), pack(_payload())
    broken = Packed(b"not a pickle", second.path, second.spans)
    with pytest.raises(Exception):
        unpack_all([first, broken, third])
    assert not any(os.path.exists(p.path) for p in (first, second, third))
