"""Task graphs (mvopt/engine/tasks.py): validation's cycle check."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mvopt.engine import tasks
from mvopt.engine.tasks import TaskGraphBuilder
from mvopt.errors import ConfigError


def test_a_graph_whose_dependencies_point_back_is_acyclic_without_kahns_pass(monkeypatch) -> None:
    """Predecessors with lower ids (what the builders produce) make the ids a topological order:
    validation then needs one comparison per dependency, not Kahn's pass per level."""
    g = TaskGraphBuilder()
    a = g.flow(0, 1, 100)
    b = g.flow(1, 2, 100, after=[a])
    g.delay(2, 5, after=[a, b])
    graph = g.build()

    def no_kahn(_):
        raise AssertionError("Kahn's pass was not needed")

    monkeypatch.setattr(tasks, "_kahn", no_kahn)
    graph.validate(3)


def test_a_later_predecessor_gets_kahns_check_both_ways() -> None:
    """A predecessor with a higher id (an explicit task list may name a later task) is checked
    by Kahn's algorithm: acyclic passes, a cycle is refused."""
    g = TaskGraphBuilder()
    g.flow(0, 1, 100, after=[1])          # waits for the next task
    g.flow(1, 2, 100)
    g.build().validate(3)
    cyclic = dataclasses.replace(g.build(), pred=np.array([1, 0], np.int32), pred_offset=np.array([0, 1, 2]))
    with pytest.raises(ConfigError, match="cycle"):
        cyclic.validate(3)
