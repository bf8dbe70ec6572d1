"""Helpers for experiment scripts that write their results into the docs.

``update_section(path, name, markdown)`` replaces the text between ``<!-- begin:name -->`` and
``<!-- end:name -->`` in a markdown file (appending the section, or creating the file, when it is
missing) and leaves every other section untouched. ``provenance(command)`` says when, where
and from which commit a result was produced.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
import tempfile
from pathlib import Path

__all__ = ["update_section", "provenance", "git_commit", "machine_description"]

REPO = Path(__file__).resolve().parents[1]


def update_section(path: str | os.PathLike, name: str, markdown: str) -> None:
    """Put ``markdown`` between the ``begin:name``/``end:name`` markers of ``path`` (atomic write)."""
    path = Path(path)
    begin, end = f"<!-- begin:{name} -->", f"<!-- end:{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        new = pattern.sub(lambda _: block, text, count=1)
    else:
        new = (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def git_commit() -> str:
    """Short hash of HEAD (``unknown`` outside a git checkout); $MVOPT_COMMIT where set, for
    copies of a checkout whose .git is not the tree's (the GPU machine's copy of the working tree
    keeps an older .git)."""
    if os.environ.get("MVOPT_COMMIT"):
        return os.environ["MVOPT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_description() -> str:
    """CPU model, logical cores, memory, OS and Python/numpy versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, IndexError, ValueError):
        pass
    import numpy
    return (f"{cpu}, {os.cpu_count()} logical cores{mem}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, numpy {numpy.__version__}")


def provenance(command: str) -> str:
    """One markdown paragraph: date, commit, machine and the command that produced a result."""
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Measured {date} at commit `{git_commit()}` on {machine_description()}.\n"
            f"Command: `{command}`")
