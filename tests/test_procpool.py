"""Pool sizing: the cores a process may use."""

from __future__ import annotations

import os

import pytest

from mvopt.procpool import usable_cores


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_usable_cores_follow_the_affinity() -> None:
    assert usable_cores() == len(os.sched_getaffinity(0))
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


def test_a_pool_worker_ends_quietly_on_ctrl_c(tmp_path) -> None:
    """A terminal's Ctrl-C reaches the whole process group: the workers, idle or busy, end without
    printing a traceback each (the parent reports the interrupt)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import os, signal, time
        from mvopt.procpool import get_pool
        if __name__ == "__main__":
            pool = get_pool("test", 2)
            pool.submit(os.getpid).result()
            pool.submit(time.sleep, 30)             # (one worker busy, the other idle)
            time.sleep(1.0)
            for pid in list(pool._processes):
                os.kill(pid, signal.SIGINT)
            for _ in range(100):
                time.sleep(0.1)
                alive = [p for p in pool._processes.values() if p.is_alive()]
                if not alive:
                    break
            print("ended" if not alive else f"alive {len(alive)}", flush=True)
            os._exit(0)
    """)
    path = tmp_path / "pool_int.py"
    path.write_text(script)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "ended", r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr, r.stderr
