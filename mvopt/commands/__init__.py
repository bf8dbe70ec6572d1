"""Subcommand implementations of ``python -m mvopt`` (one module each: add_arguments + run)."""
