"""One configuration's step as straight-line Python: the step model's own code, traced.

`evaluate_point` calls the step model once per configuration, and on single numbers the
model's structure (part objects, dicts of parts, the shape's attributes, ~45 outputs)
costs several times its arithmetic. So, once per setup (GPU, model, formats, profile,
...), `trace` runs `core.step.evaluate_step` itself with `Symbol`s for the per-call
numbers (batch, context, prefill chunk and its cached tokens): every operation on a
symbol is recorded as a line of Python, every operation on the setup's numbers alone is
done at once (its result becomes a literal), and the outputs become one function of the
four numbers. The function runs the same IEEE operations in the same order on plain
floats as the model does on the same plain floats, so its numbers are the model's to the
bit; there is no second copy of the formulas to keep in step.

What the traced code decides from a per-call number (a Python `if` on it: `bool()`,
`float()`, `any_true`, the TPOT solver's loop) cannot be traced: it raises `NotTraced`
and the caller keeps the model itself for that setup. Elementwise choices (`where`,
`maximum`, `minimum`, `floor` of `core.elementwise`) become conditional expressions, and
numpy's transcendental functions stay numpy's (`__array_ufunc__`). A division by zero
raises ZeroDivisionError in the function as it does in the model on plain floats.
"""

from __future__ import annotations

import math

import numpy as np


class NotTraced(Exception):
    """The traced code needs a per-call number's value, not an expression of it."""


def _operator(operator: str, flip: bool = False, is_bool: bool = False):
    """A Symbol method recording `symbol operator other` (or, `flip`ped, the reverse)."""
    def method(self, other):
        operands = (other, self) if flip else (self, other)
        return self.trace.record(f"{{}} {operator} {{}}", operands, is_bool)
    return method


class Symbol:
    """A per-call number (or a value computed from one) while a step is traced."""

    __slots__ = ("trace", "name", "is_bool")
    ndim = 0
    shape = ()

    def __init__(self, trace: Trace, name: str, is_bool: bool = False) -> None:
        self.trace, self.name, self.is_bool = trace, name, is_bool

    def __bool__(self):
        raise NotTraced(f"the value of {self.name} decides a branch")

    def __float__(self):
        raise NotTraced(f"the value of {self.name} is read as a number")

    __int__ = __index__ = __float__

    def __hash__(self):  # symbols are not dict keys or set members of the traced code
        raise NotTraced(f"{self.name} used as a key")

    __add__, __radd__ = _operator("+"), _operator("+", flip=True)
    __sub__, __rsub__ = _operator("-"), _operator("-", flip=True)
    __mul__, __rmul__ = _operator("*"), _operator("*", flip=True)
    __truediv__, __rtruediv__ = _operator("/"), _operator("/", flip=True)
    __lt__, __le__ = _operator("<", is_bool=True), _operator("<=", is_bool=True)
    __gt__, __ge__ = _operator(">", is_bool=True), _operator(">=", is_bool=True)
    __eq__, __ne__ = _operator("==", is_bool=True), _operator("!=", is_bool=True)

    def __neg__(self):
        return self.trace.record("-{}", (self,))

    def __and__(self, other):
        return self._logical(other, "and")

    __rand__ = __and__

    def __or__(self, other):
        return self._logical(other, "or")

    __ror__ = __or__

    def __invert__(self):
        if not self.is_bool:
            raise NotTraced(f"~ of the number {self.name}")
        return self.trace.record("not {}", (self,), is_bool=True)

    def _logical(self, other, operator):
        """`&` and `|` of booleans, as numpy's on bool arrays."""
        if not self.is_bool or not (isinstance(other, bool | np.bool_) or (
                type(other) is Symbol and other.is_bool)):
            raise NotTraced(f"{operator} of a number with {self.name}")
        return self.trace.record(f"bool({{}} {operator} {{}})", (self, other), is_bool=True)

    def __array_ufunc__(self, ufunc, method, *arguments, **options):
        if method != "__call__" or options:
            raise NotTraced(f"numpy's {ufunc.__name__}.{method} on {self.name}")
        return self.trace.ufunc(ufunc, arguments)

    def __array_function__(self, function, types, arguments, options):
        if function is np.shape:
            return ()
        if function is np.ndim:
            return 0
        raise NotTraced(f"numpy's {function.__name__} on {self.name}")


# how each elementwise choice reads on plain floats: as `core.elementwise` computes it
MAXIMUM = "({0} if {0} >= {1} or {0} != {0} else {1})"
MINIMUM = "({0} if {0} <= {1} or {0} != {0} else {1})"
WHERE = "({1} if {0} else {2})"
FLOOR = "(float(_floor({0})) if _isfinite({0}) else {0})"
_OPERATORS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
              np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=",
              np.equal: "==", np.not_equal: "!="}
_TESTS = {"<", "<=", ">", ">=", "==", "!="}
_TEMPLATES = {np.maximum: (MAXIMUM,), np.minimum: (MINIMUM,), np.floor: (FLOOR,),
              np.negative: ("-{}",)}


class Trace:
    """The lines recorded so far, the literals they use and the per-call arguments."""

    def __init__(self, arguments: tuple[str, ...]) -> None:
        self.arguments = arguments
        self.lines: list[tuple[str, str, tuple[str, ...]]] = []  # (name, expression, uses)
        self.known: dict[str, Symbol] = {}  # expression -> its symbol (repeats reused)
        self.names = {"_floor": math.floor, "_isfinite": math.isfinite, "_inf": math.inf,
                      "_nan": math.nan, "bool": bool, "float": float}

    def symbols(self) -> list[Symbol]:
        return [Symbol(self, name) for name in self.arguments]

    def operand(self, value) -> str:
        """`value` as source: a symbol's name or a literal with the same bits."""
        if type(value) is Symbol:
            if value.trace is not self:
                raise NotTraced("a symbol of another trace")
            return value.name
        return literal(value)

    def record(self, template: str, operands: tuple, is_bool: bool = False) -> Symbol:
        """The symbol of `template` (str.format slots) applied to `operands`."""
        expression = template.format(*map(self.operand, operands))
        known = self.known.get(expression)
        if known is not None:  # the same operation on the same values: the same result
            return known
        symbol = Symbol(self, f"v{len(self.lines)}", is_bool)
        uses = tuple(operand.name for operand in operands if type(operand) is Symbol)
        self.lines.append((symbol.name, expression, uses))
        self.known[expression] = symbol
        return symbol

    def ufunc(self, ufunc, arguments) -> Symbol:
        """A numpy function of a symbol: numpy's operators as Python's on floats, the
        elementwise choices as `core.elementwise`'s, other functions numpy's own."""
        if ufunc in _OPERATORS and len(arguments) == 2:
            operator = _OPERATORS[ufunc]
            return self.record(f"{{}} {operator} {{}}", arguments, is_bool=operator in _TESTS)
        if ufunc in _TEMPLATES:
            return self.record(*_TEMPLATES[ufunc], operands=arguments)
        if ufunc in (np.bitwise_and, np.bitwise_or, np.logical_and, np.logical_or):
            first = next(value for value in arguments if type(value) is Symbol)
            return first._logical(arguments[1] if first is arguments[0] else arguments[0],
                                  "and" if ufunc in (np.bitwise_and, np.logical_and) else "or")
        name = f"_np_{ufunc.__name__}"
        if self.names.setdefault(name, ufunc) is not ufunc:
            raise NotTraced(f"two ufuncs named {ufunc.__name__}")
        is_bool = ufunc.types[-1].endswith("?")
        slots = ", ".join("{}" for _ in arguments)
        return self.record(f"{'bool' if is_bool else 'float'}({name}({slots}))", arguments,
                           is_bool)

    def function(self, outputs: dict):
        """The traced step as a function of the per-call numbers returning `outputs`
        (symbols, or values of the setup alone) as one new dict per call."""
        needed = {value.name for value in outputs.values() if type(value) is Symbol}
        kept = []
        for name, expression, uses in reversed(self.lines):  # only what an output uses
            if name in needed:
                kept.append(f"    {name} = {expression}")
                needed.update(uses)
        items = ", ".join(f"{key!r}: {self.operand(value)}" for key, value in outputs.items())
        source = (f"def traced_step({', '.join(self.arguments)}):\n"
                  + "\n".join(reversed(kept)) + f"\n    return {{{items}}}\n")
        namespace = dict(self.names)
        exec(compile(source, "<traced step>", "exec"), namespace)  # noqa: S102 (our source)
        function = namespace["traced_step"]
        function.source = source
        return function


def literal(value) -> str:
    """A setup number as Python source that evaluates to the same plain value: floats
    by their repr (exact), numpy scalars as the Python float or bool they equal."""
    if isinstance(value, bool | np.bool_):
        return repr(bool(value))
    if type(value) is int:
        return repr(value)
    if isinstance(value, float | np.floating) or (
            type(value) is np.ndarray and value.ndim == 0 and value.dtype == np.float64):
        number = float(value)
        if math.isnan(number):
            return "_nan"
        if math.isinf(number):
            return "_inf" if number > 0 else "(-_inf)"
        return f"({number!r})"
    raise NotTraced(f"a {type(value).__name__} in the traced step")
