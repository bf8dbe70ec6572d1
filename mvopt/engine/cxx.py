"""The host C++ compiler: finding it, and building a shared library from C++ source once per
version (cached under ``$MVOPT_CACHE``, default ``~/.cache/mvopt``, by the hash of the source and
the compiler command, so an edit to any part rebuilds it). The CPU backend's kernels and the
flow level's event loop are built here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from mvopt.engine.source import source_hash
from mvopt.errors import BackendUnavailable

__all__ = ["FLAGS", "cache_dir", "compiler", "openmp_works", "shared_library"]

FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-w")


def cache_dir() -> Path:
    """Where built libraries are kept: $MVOPT_CACHE, default ~/.cache/mvopt (created)."""
    d = Path(os.environ.get("MVOPT_CACHE", Path.home() / ".cache" / "mvopt"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def compiler() -> str:
    """$CXX, else g++, c++ or clang++ on the PATH; BackendUnavailable naming the fix if none."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise BackendUnavailable("the CPU backend needs a C++ compiler: install g++ "
                                 "(Debian/Ubuntu: apt-get install g++) or set CXX")
    return cxx


@lru_cache(maxsize=None)
def openmp_works(cxx: str) -> bool:
    """Whether `cxx -fopenmp` builds and runs a program (once per compiler and process)."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "t.cpp")
        src.write_text("#include <omp.h>\nint main(){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        r = subprocess.run([cxx, "-fopenmp", str(src), "-o", str(Path(d, "t"))], capture_output=True)
        return r.returncode == 0


def shared_library(source: str, prefix: str, what: str, cxx: str, flags: list[str] | tuple[str, ...]) -> Path:
    """The shared library built from C++ `source` with `cxx` and `flags`, compiled on a cache miss
    (saying so on stderr: tens of seconds) and kept as ``PREFIX_HASH.so``; `what` names it in
    messages ("the CPU engine")."""
    lib = cache_dir() / f"{prefix}_{source_hash(source, cxx, ' '.join(flags))}.so"
    if lib.exists():
        return lib
    print(f"mvopt: compiling {what} with {cxx} (once for this version, kept in {cache_dir()}) ...",
          file=sys.stderr, flush=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=cache_dir()))
    try:
        cpp = tmp_dir / "source.cpp"
        cpp.write_text(source)
        out = tmp_dir / lib.name
        r = subprocess.run([cxx, *flags, str(cpp), "-o", str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            raise BackendUnavailable(f"compiling {what} with {cxx} failed:\n{r.stderr[-4000:]}")
        os.replace(out, lib)      # atomic: a concurrent build of the same source gives the same file
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return lib
