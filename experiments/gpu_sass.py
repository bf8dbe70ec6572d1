"""The GPU kernels' machine code without a GPU: compile the kernel source as GpuBackend compiles it
(kernel_source("cuda") with its NVRTC options) with nvcc for one architecture, and write each
kernel's SASS, so that two checkouts can be compared instruction by instruction.

    python experiments/gpu_sass.py --out /tmp/sass_new
    diff -r /tmp/sass_old /tmp/sass_new && echo identical

nvcc and cuobjdump (which needs nvdisasm) come from the folder given with --cuda-bin, else from
$PATH (e.g. a CUDA toolkit's bin/, or the pip packages nvidia-cuda-nvcc, -cuobjdump, -nvdisasm). `--options` replaces the backend's options (to compile an older
checkout whose _gpu.py has no `nvrtc_options`). Writes one OUT/<kernel>.sass per kernel and
OUT/summary.txt (registers, spills and a hash per kernel). `--regs-only` writes only the
registers, stack frames and spills of every function (nvcc's -Xptxas -v, no cuobjdump needed).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mvopt.engine.source import kernel_source


def _tool(name: str, folder: str | None) -> str:
    path = str(Path(folder, name)) if folder and Path(folder, name).exists() else shutil.which(name)
    if not path:
        sys.exit(f"gpu_sass: {name} not found ({'--cuda-bin ' + folder if folder else '$PATH'}); "
                 "pass --cuda-bin with the folder that holds nvcc and cuobjdump")
    return path


def backend_options() -> list[str]:
    from mvopt.engine import _gpu
    return list(_gpu.nvrtc_options())


def split_functions(sass: str) -> dict[str, str]:
    """cuobjdump -sass output as {kernel name: its text}."""
    out: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            lines = out[m.group(1)] = []
        else:
            lines.append(" ".join(line.split()) + "\n")   # (cuobjdump pads its columns to the widest line of the file)
    return {name: "".join(text) for name, text in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="folder for the SASS files")
    ap.add_argument("--arch", default="sm_90", help="GPU architecture (default sm_90, the H200's)")
    ap.add_argument("--cuda-bin", help="folder holding nvcc and cuobjdump (default: $PATH)")
    ap.add_argument("--options", help="compiler options instead of the backend's (one string)")
    ap.add_argument("--regs-only", action="store_true", help="only registers and spills (no cuobjdump/nvdisasm)")
    args = ap.parse_args()
    nvcc = _tool("nvcc", args.cuda_bin)
    cuobjdump = None if args.regs_only else _tool("cuobjdump", args.cuda_bin)
    options = shlex.split(args.options) if args.options is not None else backend_options()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp, "kernels.cu"), Path(tmp, "kernels.cubin")
        cu.write_text(kernel_source("cuda"))
        cmd = [nvcc, "-cubin", f"-arch={args.arch}", "-Xptxas", "-v", *options, str(cu), "-o", str(cubin)]
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
        if r.returncode != 0:
            sys.exit(f"gpu_sass: nvcc failed:\n{r.stderr[-4000:]}")
        sass = "" if cuobjdump is None else \
            subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
        cubin_bytes = cubin.stat().st_size
    functions = split_functions(sass)
    lines = [f"options: {' '.join(options)}"]
    for name, text in sorted(functions.items()):
        (args.out / f"{name}.sass").write_text(text)
        lines.append(f"{name}: {hashlib.sha256(text.encode()).hexdigest()[:16]}, {text.count(chr(10))} lines")
    # (ptxas names a function on the line before its stack frame and spills)
    regs = [line.replace("ptxas info    : ", "").strip() for line in r.stderr.splitlines()
            if "Function properties for" in line or "registers" in line or "spill" in line]
    (args.out / "summary.txt").write_text("\n".join(lines + regs + [f"cubin: {cubin_bytes} bytes"]) + "\n")
    print("\n".join(lines[1:] + (regs + [f"cubin: {cubin_bytes} bytes"] if args.regs_only else [])))


if __name__ == "__main__":
    main()
