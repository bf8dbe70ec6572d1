"""Which engine backends this machine can run (tests are parametrised over all of them).

``available_backends()`` is ``["cpu"]``, plus ``"gpu"`` when CuPy imports and sees at least one
CUDA device. The answer is computed once per process. Tests use it so that the same test body
runs on every backend::

    @pytest.mark.parametrize("backend", available_backends())
    def test_something(backend): ...
"""

from __future__ import annotations

from functools import lru_cache

from mvopt.engine._gpu import gpu_available

__all__ = ["available_backends", "gpu_available"]


@lru_cache(maxsize=None)
def _backends() -> tuple[str, ...]:
    return ("cpu", "gpu") if gpu_available() else ("cpu",)


def available_backends() -> list[str]:
    """``["cpu"]``, plus ``"gpu"`` when a GPU and CuPy are present (a new list each call)."""
    return list(_backends())
