"""numpy's elementwise functions, with a shortcut for single numbers.

The step model evaluates whole grids of configurations and, one at a time, single ones:
`PointConfig.step_inputs` gives numpy float64 scalars (the arrays' IEEE arithmetic at a
fraction of a 0-d array's cost per operation), `evaluate_point` plain floats (cheaper
again; a division by zero raises, and it then redoes the step with numpy scalars). A
numpy function costs about a microsecond per call whatever the size of its arguments,
which on one configuration is most of the work; these take plain Python's path when no
argument is an array and return what numpy would (NaN propagates through `maximum` and
`minimum`; a result is a numpy scalar where an argument is one, so a later division by
zero gives inf or NaN as on arrays). Transcendental functions stay numpy's on every
path: its SIMD loops may round differently from the C library's. A `core.step_trace`
symbol (a traced per-call number) gets the same choice as an expression.
"""

from __future__ import annotations

import math

import numpy as np

from rooftui.core.step_trace import FLOOR, MAXIMUM, MINIMUM, WHERE, Symbol

_F64 = np.float64
_ARRAY = np.ndarray


def _scalar(value, *arguments):
    """A single result: a numpy scalar if any argument is one, else as it is."""
    if type(value) is float or type(value) is int:
        for argument in arguments:
            if isinstance(argument, np.generic):
                return _F64(value)
    return value


def _traced(template, *operands):
    """The symbol of `template` on `operands`, one of them a symbol."""
    symbol = next(operand for operand in operands if type(operand) is Symbol)
    return symbol.trace.record(template, operands,
                               is_bool=all(getattr(operand, "is_bool", False)
                                           or isinstance(operand, bool | np.bool_)
                                           for operand in operands[-2:]))


def as_float64(value):
    """`np.asarray(value, dtype=np.float64)`, but a single number stays a scalar (a plain
    float, or a numpy one)."""
    if type(value) is float or type(value) is _F64 or type(value) is Symbol:
        return value
    if type(value) is _ARRAY:
        return value if value.dtype == _F64 else value.astype(_F64)
    return float(value) if isinstance(value, int | float) else _F64(value)


def maximum(a, b):
    if type(a) is float and type(b) is float:  # the plain path, NaN first as numpy's
        return a if a >= b or a != a else b
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.maximum(a, b)
    if type(a) is Symbol or type(b) is Symbol:
        return _traced(MAXIMUM, a, b)
    if a != a or b != b:  # NaN
        return _scalar(math.nan, a, b)
    return _scalar(a if a >= b else b, a, b)


def minimum(a, b):
    if type(a) is float and type(b) is float:
        return a if a <= b or a != a else b
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.minimum(a, b)
    if type(a) is Symbol or type(b) is Symbol:
        return _traced(MINIMUM, a, b)
    if a != a or b != b:
        return _scalar(math.nan, a, b)
    return _scalar(a if a <= b else b, a, b)


def where(condition, a, b):
    if type(condition) is bool and type(a) is float and type(b) is float:
        return a if condition else b
    if type(condition) is _ARRAY or type(a) is _ARRAY or type(b) is _ARRAY:
        return np.where(condition, a, b)
    if type(condition) is Symbol:
        return _traced(WHERE, condition, a, b)
    return _scalar(a if condition else b, condition, a, b)


def floor(value):
    if type(value) is Symbol:
        return _traced(FLOOR, value)
    if type(value) is _ARRAY or not math.isfinite(value):
        return np.floor(value)
    return _scalar(float(math.floor(value)), value)


def any_true(value) -> bool:
    return bool(value.any()) if type(value) is _ARRAY else bool(value)


def all_true(value) -> bool:
    return bool(value.all()) if type(value) is _ARRAY else bool(value)
