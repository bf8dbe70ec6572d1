"""GPU backend: the same kernel sources compiled by NVRTC through CuPy, run as a megakernel.

The batch tables are uploaded once, the cooperative kernel runs up to ``chunk_iters``
iterations per launch (grid-wide barriers between phases, see kernels/mv_cuda_main.cuh), the
host only checks how many experiments are still running, and the state comes back once at
the end. Compiled with ``--fmad=false`` so that results are bit-identical to the CPU backend.
"""

from __future__ import annotations

import ctypes

import numpy as np

from mvopt.engine import schema
from mvopt.engine._cpu import _Ctx
from mvopt.engine.batch import Batch
from mvopt.engine.source import kernel_source
from mvopt.errors import BackendUnavailable

__all__ = ["GpuBackend", "gpu_available"]

THREADS = 128


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


class GpuBackend:
    """Runs batches on one NVIDIA GPU."""

    name = "gpu"

    def __init__(self, device: int = 0) -> None:
        try:
            import cupy
        except ImportError:
            raise BackendUnavailable("the GPU backend needs CuPy: pip install 'mvopt[gpu-cuda13]' "
                                     "(or gpu-cuda12)") from None
        if not gpu_available():
            raise BackendUnavailable("the GPU backend found no CUDA device")
        self.cp = cupy
        self.device = device
        with cupy.cuda.Device(device):
            self.module = cupy.RawModule(code=kernel_source("cuda"), options=("--fmad=false", "-std=c++17"),
                                         enable_cooperative_groups=True)
            self.kernel = self.module.get_function("mv_run_coop")
            props = cupy.cuda.runtime.getDeviceProperties(device)
            self.sms = int(props["multiProcessorCount"])
            try:
                per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.kernel.kernel.ptr, THREADS, 0)
            except Exception:
                per_sm = 1
            self.max_blocks = max(1, self.sms * int(per_sm))

    def run(self, batch: Batch, *, chunk_iters: int = 1 << 16) -> int:
        """Simulate the batch on the GPU; the batch's arrays receive the final state."""
        cp = self.cp
        with cp.cuda.Device(self.device):
            dev = {}
            ctx = _Ctx()
            for s in schema.SCALARS:
                setattr(ctx, s, int(batch.counts[s]))
            for col in schema.COLUMNS:
                host = batch.cols[col.name]
                d = cp.asarray(host.view(np.uint8).reshape(-1)) if host.nbytes else cp.zeros(8, np.uint8)
                dev[col.name] = d
                setattr(ctx, col.name, int(d.data.ptr))
            ctx_dev = cp.asarray(np.frombuffer(bytes(ctx), dtype=np.uint8))
            out = cp.zeros(2, dtype=np.int64)
            n_rows = max(int(batch.counts["n_node"]), int(batch.counts["n_exp"]))
            blocks = int(min(self.max_blocks, max(1, -(-n_rows // THREADS))))
            status = dev["exp_status"]
            total = 0
            while True:
                # kernels of a module built with enable_cooperative_groups launch cooperatively
                self.kernel((blocks,), (THREADS,), (ctx_dev, np.int64(chunk_iters), out))
                total += int(out[0].get())
                if not (status.view(np.int32) == 0).any():
                    break
            for col in schema.COLUMNS:
                if col.doc.startswith("state"):
                    host = batch.cols[col.name]
                    if host.nbytes:
                        host.view(np.uint8).reshape(-1)[:] = dev[col.name].get()
            return total
