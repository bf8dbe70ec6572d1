"""Programmatic dependent launch (CUDA 12+, sm_90+) of a CuPy kernel, through the driver API.

CuPy launches a kernel only after the one ahead of it in the stream has ended, and so pays the
launch latency at every kernel boundary. `cuLaunchKernelEx` with the attribute "programmatic
stream serialization" lets the driver start launching a kernel while the one ahead still runs;
the kernel itself then waits (`griddepcontrol.wait`, kernels/mv_cuda_main.cuh) until that one
has ended and its writes are visible, so the order is that of two plain launches. CuPy has no
binding for `cuLaunchKernelEx`, hence ctypes. Launches inside a stream capture become graph
edges of the same kind.
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["DependentLauncher"]

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6   # CUlaunchAttributeID (cuda.h)


class _AttributeValue(ctypes.Union):      # CUlaunchAttributeValue: a 64-byte union
    _fields_ = [("pad", ctypes.c_char * 64), ("align", ctypes.c_void_p),
                ("programmaticStreamSerializationAllowed", ctypes.c_int)]


class _Attribute(ctypes.Structure):       # CUlaunchAttribute
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttributeValue)]


class _LaunchConfig(ctypes.Structure):    # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_Attribute)), ("numAttrs", ctypes.c_uint)]


def _argument(value) -> ctypes._SimpleCData:
    """A kernel argument as the ctypes value whose address the driver reads."""
    if isinstance(value, np.int64):
        return ctypes.c_int64(int(value))
    if isinstance(value, np.int32):
        return ctypes.c_int32(int(value))
    if hasattr(value, "data") and hasattr(value.data, "ptr"):    # a CuPy array: its device address
        return ctypes.c_void_p(int(value.data.ptr))
    raise TypeError(f"unsupported kernel argument type {type(value).__name__}")


class DependentLauncher:
    """Launches CuPy RawKernels with programmatic stream serialization allowed."""

    def __init__(self) -> None:
        """Raises OSError when the CUDA driver library or `cuLaunchKernelEx` is missing."""
        self._launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        self._attr = _Attribute(id=CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        self._attr.value.programmaticStreamSerializationAllowed = 1

    def __call__(self, kernel, grid: int, block: int, args: tuple, stream_ptr: int) -> None:
        """Launch `kernel` (a cupy.RawKernel) on `grid` blocks of `block` threads on the stream
        whose handle is `stream_ptr`; raises RuntimeError with the driver's code on failure."""
        values = [_argument(a) for a in args]
        params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        config = _LaunchConfig(grid, 1, 1, block, 1, 1, 0, stream_ptr, ctypes.pointer(self._attr), 1)
        rc = self._launch(ctypes.byref(config), ctypes.c_void_p(kernel.kernel.ptr), params, None)
        if rc != 0:
            raise RuntimeError(f"cuLaunchKernelEx failed (CUresult {rc})")
