"""Helpers to run mvopt commands as subprocesses and to wait for what they write."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def start(args: list[str], env: dict, **kw) -> subprocess.Popen:
    """``python optimize_cli_runner.py ARGS`` in the background (stdout/stderr captured)."""
    return subprocess.Popen([sys.executable, str(HERE / "optimize_cli_runner.py"), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def run(args: list[str], env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python optimize_cli_runner.py ARGS`` to completion."""
    return subprocess.run([sys.executable, str(HERE / "optimize_cli_runner.py"), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def lines(path: str | Path) -> list[str]:
    p = Path(path)
    return p.read_text().splitlines() if p.exists() else []


def wait_for(predicate, timeout: float = 60, what: str = "condition", procs=()) -> None:
    """Poll ``predicate()`` every 50 ms; fail with ``what`` (and the processes' output) on timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        for p in procs:
            if p.poll() is not None and p.returncode != 0:
                raise AssertionError(f"process exited {p.returncode} while waiting for {what}: {p.stderr.read()}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
