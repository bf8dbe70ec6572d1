"""Helpers shared by the tests: tiny scenarios (:mod:`mvopt.testing.scenarios`)."""
