"""numpy's elementwise functions, with a shortcut for single numbers.

The step model evaluates whole grids of configurations and, one at a time, single ones
(`PointConfig.step_inputs` gives numpy float64 scalars: the arrays' IEEE arithmetic at a
fraction of a 0-d array's cost per operation). A numpy function costs about a
microsecond per call whatever the size of its arguments, which on one configuration is
most of the work; these take plain Python's path when no argument is an array and
return what numpy would (NaN propagates through `maximum` and `minimum`; results are
numpy scalars, so a later division by zero gives inf or NaN as on arrays, never an
exception). Transcendental functions stay numpy's on every path: its SIMD loops may
round differently from the C library's.
"""

from __future__ import annotations

import math

import numpy as np

_F64 = np.float64
_ARRAY = np.ndarray


def _scalar(value):
    return value if isinstance(value, np.generic) else _F64(value)


def as_float64(value):
    """`np.asarray(value, dtype=np.float64)`, but a single number stays a scalar."""
    if type(value) is _F64:
        return value
    if type(value) is _ARRAY:
        return value if value.dtype == _F64 else value.astype(_F64)
    return _F64(value)


def maximum(a, b):
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.maximum(a, b)
    if a != a or b != b:  # NaN
        return _F64(math.nan)
    return _scalar(a if a >= b else b)


def minimum(a, b):
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.minimum(a, b)
    if a != a or b != b:
        return _F64(math.nan)
    return _scalar(a if a <= b else b)


def where(condition, a, b):
    if type(condition) is _ARRAY or type(a) is _ARRAY or type(b) is _ARRAY:
        return np.where(condition, a, b)
    return _scalar(a if condition else b)


def floor(value):
    if type(value) is _ARRAY or not math.isfinite(value):
        return np.floor(value)
    return _F64(math.floor(value))


def any_true(value) -> bool:
    return bool(value.any()) if type(value) is _ARRAY else bool(value)


def all_true(value) -> bool:
    return bool(value.all()) if type(value) is _ARRAY else bool(value)
