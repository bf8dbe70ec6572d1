"""Configuration sections (private; the public entry point is :mod:`mvopt.config`)."""
