"""Engine-test fixtures: ``backend`` runs a test once per available backend (cpu, and gpu when
CuPy and a GPU are present), the same test body for each."""

from __future__ import annotations

import pytest

from mvopt.testing.backends import available_backends


def _params() -> list:
    return [pytest.param(b, marks=[pytest.mark.gpu] if b == "gpu" else [], id=b) for b in available_backends()]


@pytest.fixture(scope="session", params=_params())
def backend(request) -> str:
    """Name of an engine backend for :func:`mvopt.engine.simulate` (session-scoped, so that
    hypothesis tests may use it)."""
    return request.param
