"""The driver-API launcher's argument marshalling (runs without a GPU; the launches themselves
are checked in test_gpu_launch.py)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from mvopt.engine._pdl import _argument, _Attribute, _LaunchConfig


class _FakeDeviceArray:       # what the launcher reads of a CuPy array: .data.ptr
    class data:
        ptr = 0x7F00_0000_1000


def test_arguments_become_the_kernels_parameter_types() -> None:
    a = _argument(np.int64(-5))
    b = _argument(np.int32(7))
    c = _argument(_FakeDeviceArray())
    assert isinstance(a, ctypes.c_int64) and a.value == -5
    assert isinstance(b, ctypes.c_int32) and b.value == 7
    assert isinstance(c, ctypes.c_void_p) and c.value == 0x7F00_0000_1000


def test_an_argument_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="float"):
        _argument(1.5)


def test_driver_structures_have_cuda_h_layout() -> None:
    # CUlaunchAttribute: id (4) + pad (4) + a 64-byte union; CUlaunchConfig: 7 uints, then the
    # stream handle at offset 32, the attribute pointer, the count
    assert ctypes.sizeof(_Attribute) == 72 and _Attribute.value.offset == 8
    assert _LaunchConfig.hStream.offset == 32 and _LaunchConfig.attrs.offset == 40
    assert _LaunchConfig.numAttrs.offset == 48 and ctypes.sizeof(_LaunchConfig) == 56
