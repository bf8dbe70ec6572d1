"""Compile experiments/ns3/mvopt_ns3.cc against the ns-3 of the PyPI package ``ns3==3.44.post0``.

    pip install --no-deps ns3==3.44.post0      # ns-3 shared libraries + headers, ~70 MB, ~25 s
    python experiments/ns3/build.py            # prints the binary's path (cached)

The package ships ``ns3/include`` and ``ns3/lib64`` inside site-packages; the scenario is compiled
with g++ against them (no Python bindings, no cppyy) with an rpath to ``lib64``. The binary is
cached under ``$MVOPT_NS3_CACHE`` (default ``~/.cache/mvopt/ns3``), keyed by a hash of the source,
the compiler command and the ns-3 location, so it is compiled once (~1 min on 2 cores).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["Ns3Unavailable", "ns3_root", "unavailable_reason", "build", "SOURCE"]

SOURCE = Path(__file__).resolve().with_name("mvopt_ns3.cc")
NS3_VERSION = "3.44"
LIB_PREFIX = "ns3.44"  # libraries are named libns3.44-<module>.so
LIBS = ("core", "network", "internet", "point-to-point", "traffic-control", "applications", "stats",
        "bridge", "mobility")
# what the package's CMake targets define for their users (ns3Targets.cmake)
DEFINES = ("NS3_BUILD_PROFILE_RELEASE", "NS3_LOG_ENABLE", "NS3_ASSERT_ENABLE")


class Ns3Unavailable(RuntimeError):
    """ns-3 (the ``ns3`` package) or a C++ compiler is missing."""


def ns3_root() -> Path:
    """The ``ns3`` folder of the installed package (holds ``include/`` and ``lib64/``)."""
    from importlib import metadata
    try:
        dist = metadata.distribution("ns3")
    except metadata.PackageNotFoundError:
        raise Ns3Unavailable("the ns3 package is not installed: pip install --no-deps ns3==3.44.post0") from None
    root = Path(dist.locate_file("ns3"))
    if not (root / "include" / "ns3" / "core-module.h").exists() or not (root / "lib64").is_dir():
        raise Ns3Unavailable(f"the ns3 package at {root} has no include/ns3 or lib64")
    if not (root / "lib64" / f"lib{LIB_PREFIX}-core.so").exists():
        raise Ns3Unavailable(f"ns3 package at {root} is not ns-3 {NS3_VERSION} (pip install ns3==3.44.post0)")
    return root


def compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise Ns3Unavailable("no C++ compiler (g++) on PATH")
    return cxx


def unavailable_reason() -> str | None:
    """Why the harness cannot run here (None when it can)."""
    try:
        ns3_root()
        compiler()
    except Ns3Unavailable as e:
        return str(e)
    return None


def command(out: Path) -> list[str]:
    root = ns3_root()
    lib = root / "lib64"
    return ([compiler(), "-O2", "-std=c++20", "-w", *(f"-D{d}" for d in DEFINES), f"-I{root / 'include'}",
             str(SOURCE), "-o", str(out), f"-L{lib}", f"-Wl,-rpath,{lib}"]
            + [f"-l{LIB_PREFIX}-{m}" for m in LIBS])


def cache_dir() -> Path:
    """``$MVOPT_NS3_CACHE``, else ``~/.cache/mvopt/ns3``, else the temp folder when home is read-only."""
    if os.environ.get("MVOPT_NS3_CACHE"):
        return Path(os.environ["MVOPT_NS3_CACHE"])
    home = Path.home() / ".cache" / "mvopt" / "ns3"
    try:
        home.mkdir(parents=True, exist_ok=True)
        if os.access(home, os.W_OK):
            return home
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / "mvopt-ns3-cache"


def build(force: bool = False, verbose: bool = False) -> Path:
    """Path of the compiled scenario program (compiled now if not cached)."""
    key_cmd = command(Path("OUT"))
    key = hashlib.sha256(SOURCE.read_bytes() + "\0".join(key_cmd).encode()).hexdigest()[:16]
    binary = cache_dir() / key / "mvopt_ns3"
    if binary.exists() and not force:
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mvopt_ns3.", dir=binary.parent)
    os.close(fd)
    cmd = command(Path(tmp))
    if verbose:
        print(" ".join(cmd), file=sys.stderr)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"compiling {SOURCE.name} failed:\n{r.stderr[-4000:]}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, binary)   # atomic: concurrent builders (pytest-xdist) do not see half a file
    return binary


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="recompile even when cached")
    args = ap.parse_args()
    reason = unavailable_reason()
    if reason:
        sys.exit(reason)
    print(build(force=args.force, verbose=True))
