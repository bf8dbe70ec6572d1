"""Exception types shared by every layer of mvopt.

Library code raises these; only the CLI turns them into a one-line message and an exit code.
"""

from __future__ import annotations

import os

__all__ = ["MvoptError", "ConfigError", "InputFileError", "InfeasibleError", "BackendUnavailable"]


class MvoptError(Exception):
    """Base class of every error mvopt reports to a user."""


class ConfigError(MvoptError, ValueError):
    """Invalid experiment configuration or search space.

    ``path`` is the full dotted path of the offending field (``cluster.k``), ``value`` what was
    given and ``allowed`` what would have been accepted. ``str()`` gives
    ``"<source>: <path>: <allowed>, got <value>"``.
    """

    def __init__(self, path: str, allowed: str, value: object = None, *, source: str | None = None,
                 show_value: bool = True) -> None:
        self.path = path
        self.allowed = allowed
        self.value = value
        self.source = source
        self.show_value = show_value
        super().__init__(self._message())

    def _message(self) -> str:
        # (a file that cannot be read is both the source and the path: named once)
        same = self.source and os.path.normpath(self.source) == os.path.normpath(self.path)
        where = f"{self.source}: " if self.source and not same else ""
        got = f", got {self.value!r}" if self.show_value else ""
        return f"{where}{self.path}: {self.allowed}{got}"

    def with_source(self, source: str) -> "ConfigError":
        """The same error, attributed to a file (for messages naming the file)."""
        return ConfigError(self.path, self.allowed, self.value, source=source, show_value=self.show_value)

    def __reduce__(self):
        # whole from a worker process (the default rebuilds from the message alone, which fails)
        return _config_error, (self.path, self.allowed, self.value, self.source, self.show_value)


def _config_error(path: str, allowed: str, value: object, source: str | None, show_value: bool) -> ConfigError:
    return ConfigError(path, allowed, value, source=source, show_value=show_value)


class InputFileError(MvoptError, ValueError):
    """A malformed input file (HPCC topology/flow/config files, nccl-tests logs, workloads)."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        self.file = file
        self.line = line
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}")


class InfeasibleError(MvoptError):
    """A well-formed configuration that cannot run (does not fit in memory, indivisible layers...)."""


class BackendUnavailable(MvoptError, RuntimeError):
    """The requested simulation backend cannot be used here (no compiler, no CuPy, no GPU)."""


class ApproximationWarning(UserWarning):
    """A requested shortcut (e.g. ``workload.rail_sample``) is only approximate for this input."""
