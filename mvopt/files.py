"""Reading and writing the user's files: one clear error for a file that cannot be read or
written, and writes that never leave a half-written file behind.

Every reader of an input file (configurations, search spaces, foreign formats) takes its text
through :func:`read_text` (binary ones through :func:`read_bytes`); every writer of an output file goes through :func:`write_atomic`
(a temporary file in the same folder, renamed over the target once complete).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from mvopt.errors import InputFileError, MvoptError

__all__ = ["read_bytes", "read_text", "write_atomic", "write_text_atomic"]


def read_text(path: str | os.PathLike, error: Callable[[str], MvoptError] | None = None) -> str:
    """The text of the file at `path`. A file that is missing, a folder, unreadable or not UTF-8
    text raises ``error(reason)`` (default: InputFileError naming the file), reason being e.g.
    ``"cannot be read (No such file or directory)"``."""
    make = error or (lambda why: InputFileError(str(path), None, why))
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise make(f"cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise make(f"cannot be read (not UTF-8 text: byte 0x{e.object[e.start]:02x} at offset {e.start})") from None


def _umask() -> int:
    # (read, not set and restored: setting it would race with files other threads create)
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, write: Callable[[IO], None], binary: bool = False) -> None:
    """Write the file at `path` with ``write(f)`` through a temporary file in the same folder,
    renamed over `path` only once complete (an interrupted write leaves the old file, or none).
    A symbolic link is followed (its target is replaced, the link stays); a target that is not a
    regular file (/dev/null, a FIFO) is written in place. A new file gets the permissions a plain
    ``open`` would give it, a replaced one keeps its own. A folder that does not exist or cannot
    be written raises InputFileError naming `path`."""
    shown = str(path)
    path = Path(os.path.realpath(path))
    mode = "wb" if binary else "w"
    encoding = None if binary else "utf-8"
    try:
        st = path.stat()
    except OSError:
        st = None
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(path, mode, encoding=encoding) as f:
                write(f)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise InputFileError(shown, None, f"cannot be written ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, mode, encoding=encoding) as f:
            # (mkstemp makes it 0600)
            os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
            write(f)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise InputFileError(shown, None, f"cannot be written ({e.strerror or e})") from None
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """:func:`write_atomic` of `text`."""
    write_atomic(path, lambda f: f.write(text))


def read_bytes(path: str | os.PathLike, error: Callable[[str], MvoptError] | None = None) -> bytes:
    """The bytes of the file at `path`; a missing, folder or unreadable file raises
    ``error(reason)`` (default: InputFileError naming the file)."""
    make = error or (lambda why: InputFileError(str(path), None, why))
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise make(f"cannot be read ({e.strerror or e})") from None
