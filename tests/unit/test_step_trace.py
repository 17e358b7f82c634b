"""core.step_trace: what is traced on symbols, run on plain floats, gives what the same
code gives on those floats, to the bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooftui.core.elementwise import as_float64, floor, maximum, minimum, where
from rooftui.core.step_parts import is_scalar
from rooftui.core.step_trace import NotTraced, Trace

numbers = st.floats(allow_nan=True, allow_infinity=True)
finite = st.floats(-1e300, 1e300)


def bits(value) -> str:
    return float(value).hex() if not isinstance(value, bool | np.bool_) else str(bool(value))


def step_like(a, b, switch, constant):
    """Some of what the step model does to its numbers, through core.elementwise."""
    flag = switch > 0.5
    scaled = np.float64(constant) * a + b / 3.0
    return {
        "maximum": maximum(a, b), "minimum": minimum(a, b), "where": where(flag, a, b),
        "where_of_test": where(a > b, scaled, 0.0), "floor": floor(a),
        "scaled": scaled, "exp": np.exp(-as_float64(b) * 1e-3),
        "sqrt": np.sqrt(maximum(a, 0.0)), "gate": constant * (a > 0),
        "both": (a >= b) & flag, "either": (a < b) | flag, "neither": ~((a < b) | flag),
        "constant": constant * 2.0,
    }


@given(a=numbers, b=finite.filter(lambda v: v != 0), switch=st.sampled_from([0.0, 1.0]),
       constant=finite)
def test_the_traced_function_gives_the_codes_bits(a, b, switch, constant):
    trace = Trace(("a", "b", "switch"))
    traced = trace.function(step_like(*trace.symbols(), constant))
    with np.errstate(all="ignore"):
        # on numpy scalars: the meaning the step's code has on arrays (`~` a logical not)
        expected = step_like(np.float64(a), np.float64(b), np.float64(switch), constant)
        got = traced(a, b, switch)
    assert list(got) == list(expected)
    for key, value in expected.items():
        assert bits(got[key]) == bits(value), (key, got[key], value)
        assert type(got[key]) in (float, bool), key  # plain Python values


def test_only_what_an_output_uses_is_computed_and_repeats_once():
    trace = Trace(("x",))
    (x,) = trace.symbols()
    _unused = x * 7.0
    traced = trace.function({"y": (x + 1.0) * (x + 1.0), "z": 5.0})
    assert "7.0" not in traced.source
    assert traced.source.count("+ (1.0)") == 1
    assert traced(2.0) == {"y": 9.0, "z": 5.0}


def test_a_branch_on_a_per_call_number_is_refused():
    trace = Trace(("x",))
    (x,) = trace.symbols()
    assert not is_scalar(x, 0)  # a symbol is never taken for a switched-off feature
    with pytest.raises(NotTraced):
        bool(x > 1.0)
    with pytest.raises(NotTraced):
        float(x)
    with pytest.raises(NotTraced):
        np.concatenate([x])


def test_a_division_by_zero_raises_as_on_plain_floats():
    trace = Trace(("x",))
    (x,) = trace.symbols()
    traced = trace.function({"inverse": 1.0 / x, "inf": math.inf})
    assert traced(4.0) == {"inverse": 0.25, "inf": math.inf}
    with pytest.raises(ZeroDivisionError):
        traced(0.0)
