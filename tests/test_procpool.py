"""Pool sizing: the cores a process may use."""

from __future__ import annotations

import os

import pytest

from mvopt.procpool import usable_cores


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_usable_cores_follow_the_affinity() -> None:
    assert usable_cores() == len(os.sched_getaffinity(0))
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


def _run_pool_script(tmp_path, parent_ignores: bool) -> tuple[str, str]:
    """Start a pool of 2 workers (one then idle, one busy), send SIGINT to both, report whether
    they ended; the parent ignores SIGINT itself if `parent_ignores` (before the pool starts)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, signal, time
        from mvopt.procpool import get_pool
        if __name__ == "__main__":
            if {parent_ignores!r}:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            pool = get_pool("test", 2)
            first, second = pool.submit(time.sleep, 1.0), pool.submit(time.sleep, 30)
            first.result()                           # (both workers started; the first is idle now)
            for pid in list(pool._processes):
                os.kill(pid, signal.SIGINT)
            for _ in range(50):
                time.sleep(0.1)
                alive = [p for p in pool._processes.values() if p.is_alive()]
                if not alive:
                    break
            print(f"{{len(pool._processes)}} workers, {{len(alive)}} alive", flush=True)
            for p in alive:                          # (they hold the test's output pipes)
                p.kill()
            os._exit(0)
    """)
    path = tmp_path / "pool_int.py"
    path.write_text(script)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    return r.stdout.strip(), r.stderr


def test_a_pool_worker_ends_quietly_on_ctrl_c(tmp_path) -> None:
    """A terminal's Ctrl-C reaches the whole process group: the workers, idle or busy, end without
    printing a traceback each (the parent reports the interrupt)."""
    out, err = _run_pool_script(tmp_path, parent_ignores=False)
    assert out == "2 workers, 0 alive", out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_pool_workers_of_a_parent_that_ignores_ctrl_c_ignore_it_too(tmp_path) -> None:
    """A run started in the background by a script ignores SIGINT; so do its workers, which keep
    working (they would otherwise die under a parent that carries on)."""
    out, err = _run_pool_script(tmp_path, parent_ignores=True)
    assert out == "2 workers, 2 alive", out + err
