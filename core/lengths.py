"""Request length distributions (prompt or output tokens): parse, sample, CDF, quantiles.

Spec strings, as `--input-tokens` / `--output-tokens` take them:

    fixed:N                             every request N tokens
    exp:mean=M[,cap=C]                  exponential with mean M, optionally capped at C
    lognormal:median=M,sigma=S[,cap=C]  log-normal: median M, log-space std S
    bimodal:p=P,a=A,b=B[,cap=C]         with probability P from component a, else b; a
                                        number is an exponential of that mean, and
                                        `(SPEC)` in parentheses any other distribution,
                                        e.g. bimodal:p=0.6,a=(fixed:96),b=(exp:mean=450)
    empirical:PATH                      the column of a trace file (CSV here; parquet
                                        through a reader the caller passes in)

A distribution is a law on token counts. `survival`, `cdf`, `quantile`, `mean` describe
the law exactly as written (continuous for the parametric ones); `sample` draws token
counts for a simulation: continuous draws are rounded to the nearest integer and at least
1 (a request produces at least one token), which moves means by well under one token.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

from rooftui.core import limits
from rooftui.core.errors import SpecError

TRACE_COLUMNS = ("input_tokens", "output_tokens")
MOST_TOKENS = limits.BOUNDS["tokens"].maximum  # of one request's prompt or output
ARRIVAL_COLUMN = "arrival_s"

# A function that reads a trace file into named columns (see `read_trace_csv`).
TraceReader = Callable[[Path], dict[str, np.ndarray]]


def tokens(draws: np.ndarray) -> np.ndarray:
    """Continuous draws as token counts: nearest integer, at least 1 and at most
    `MOST_TOKENS` (a far tail of a log-normal would overflow int64)."""
    return np.clip(np.rint(draws), 1, MOST_TOKENS).astype(np.int64)


class LengthDistribution:
    """A law on token counts. Subclasses give `survival`, `_draw` and `upper`."""

    spec: str = ""
    upper: float = math.inf  # the largest value with positive probability
    discrete = False  # True: all mass on the values in `atoms()`

    def survival(self, x: np.ndarray) -> np.ndarray:
        """P(L > x)."""
        raise NotImplementedError

    def cdf(self, x) -> np.ndarray:
        """P(L <= x)."""
        return 1.0 - self.survival(np.asarray(x, dtype=np.float64))

    def quantile(self, q) -> np.ndarray:
        """The smallest x with P(L <= x) >= q, found by bisection on the CDF (subclasses
        with a closed form override it)."""
        q = np.asarray(q, dtype=np.float64)
        low = np.zeros_like(q)
        high = np.full_like(q, self._finite_upper())
        for _ in range(200):
            middle = 0.5 * (low + high)
            below = self.cdf(middle) < q
            low = np.where(below, middle, low)
            high = np.where(below, high, middle)
        return high

    def mean(self) -> float:
        from rooftui.core.occupancy import expected_max  # the same integral at B = 1

        return expected_max(self, 1)

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` token counts (int64)."""
        return tokens(self._draw(rng, count))

    def _draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        raise NotImplementedError

    def atoms(self) -> np.ndarray:
        """Values carrying probability mass (breakpoints for integration)."""
        return np.array([self.upper]) if math.isfinite(self.upper) else np.array([])

    def _finite_upper(self) -> float:
        if math.isfinite(self.upper):
            return self.upper
        x = max(self.mean_hint(), 1.0)
        while self.survival(np.array([x]))[0] > 1e-18:
            x *= 2.0
        return x

    def mean_hint(self) -> float:
        """A rough scale for searches (the median is good enough)."""
        return 1.0

    def __str__(self) -> str:
        return self.spec


@dataclass(frozen=True, eq=False)
class Fixed(LengthDistribution):
    value: float
    spec: str = ""
    discrete = True

    @property
    def upper(self) -> float:  # type: ignore[override]
        return self.value

    def survival(self, x):
        return np.where(np.asarray(x) < self.value, 1.0, 0.0)

    def quantile(self, q):
        return np.full(np.shape(q), self.value)

    def mean(self) -> float:
        return self.value

    def sample(self, rng, count):
        return np.full(count, int(self.value), dtype=np.int64)

    def atoms(self):
        return np.array([self.value])


@dataclass(frozen=True, eq=False)
class Exponential(LengthDistribution):
    mean_tokens: float
    spec: str = ""

    def survival(self, x):
        return np.exp(-np.maximum(np.asarray(x, dtype=np.float64), 0.0) / self.mean_tokens)

    def quantile(self, q):
        return -self.mean_tokens * np.log1p(-np.asarray(q, dtype=np.float64))

    def mean(self) -> float:
        return self.mean_tokens

    def _draw(self, rng, count):
        return rng.exponential(self.mean_tokens, count)

    def mean_hint(self):
        return self.mean_tokens


_erfc = np.frompyfunc(math.erfc, 1, 1)
_standard_normal_quantile = np.frompyfunc(
    lambda q: -math.inf if q == 0 else math.inf if q == 1 else NormalDist().inv_cdf(q), 1, 1)


@dataclass(frozen=True, eq=False)
class Lognormal(LengthDistribution):
    median: float
    sigma: float
    spec: str = ""

    def survival(self, x):
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(divide="ignore"):
            z = (np.log(np.maximum(x, 0.0)) - math.log(self.median)) / (self.sigma * math.sqrt(2))
        return 0.5 * np.asarray(_erfc(z), dtype=np.float64)

    def quantile(self, q):
        z = _standard_normal_quantile(np.clip(np.asarray(q, dtype=np.float64), 0.0, 1.0))
        return self.median * np.exp(self.sigma * np.asarray(z, dtype=np.float64))

    def mean(self) -> float:
        return self.median * math.exp(0.5 * self.sigma ** 2)

    def _draw(self, rng, count):
        return rng.lognormal(math.log(self.median), self.sigma, count)

    def mean_hint(self):
        return self.median


@dataclass(frozen=True, eq=False)
class Mixture(LengthDistribution):
    """With probability `p` a draw of `a`, else of `b`."""

    p: float
    a: LengthDistribution
    b: LengthDistribution
    spec: str = ""

    @property
    def upper(self) -> float:  # type: ignore[override]
        return max(self.a.upper, self.b.upper)

    @property
    def discrete(self) -> bool:  # type: ignore[override]
        return self.a.discrete and self.b.discrete

    def survival(self, x):
        return self.p * self.a.survival(x) + (1 - self.p) * self.b.survival(x)

    def mean(self) -> float:
        return self.p * self.a.mean() + (1 - self.p) * self.b.mean()

    def sample(self, rng, count):
        # both components drawn in full so the stream does not depend on the coin flips
        pick_a = rng.random(count) < self.p
        return np.where(pick_a, self.a.sample(rng, count), self.b.sample(rng, count))

    def atoms(self):
        return np.concatenate([self.a.atoms(), self.b.atoms()])

    def mean_hint(self):
        return max(self.a.mean_hint(), self.b.mean_hint())


@dataclass(frozen=True, eq=False)
class Capped(LengthDistribution):
    """min(base, cap): what a `max_tokens` limit does to a length law."""

    base: LengthDistribution
    cap: float
    spec: str = ""

    @property
    def upper(self) -> float:  # type: ignore[override]
        return min(self.cap, self.base.upper)

    @property
    def discrete(self) -> bool:  # type: ignore[override]
        return self.base.discrete

    def survival(self, x):
        x = np.asarray(x, dtype=np.float64)
        return np.where(x < self.cap, self.base.survival(x), 0.0)

    def quantile(self, q):
        return np.minimum(self.base.quantile(q), self.cap)

    def sample(self, rng, count):
        return np.minimum(self.base.sample(rng, count), int(self.cap))

    def atoms(self):
        return np.concatenate([self.base.atoms(), [self.cap]])

    def mean_hint(self):
        return min(self.base.mean_hint(), self.cap)


@dataclass(frozen=True, eq=False)
class Empirical(LengthDistribution):
    """Equal mass on each observed value (a trace column); exact, no smoothing."""

    values: np.ndarray  # sorted ascending
    spec: str = ""
    discrete = True

    @staticmethod
    def of(values: np.ndarray, spec: str = "") -> Empirical:
        values = np.sort(np.asarray(values, dtype=np.float64))
        if values.size == 0:
            raise SpecError(f"{spec or 'empirical distribution'}: no values")
        return Empirical(values=values, spec=spec)

    @property
    def upper(self) -> float:  # type: ignore[override]
        return float(self.values[-1])

    def survival(self, x):
        below = np.searchsorted(self.values, np.asarray(x, dtype=np.float64), side="right")
        return 1.0 - below / self.values.size

    def quantile(self, q):
        return np.quantile(self.values, q, method="inverted_cdf")

    def mean(self) -> float:
        return float(self.values.mean())

    def sample(self, rng, count):
        return self.values[rng.integers(0, self.values.size, count)].astype(np.int64)

    def atoms(self):
        return np.unique(self.values)


@dataclass(frozen=True, eq=False)
class QuantileTable(LengthDistribution):
    """The law whose quantile function is linear between the points (probability,
    value) of a table: probabilities strictly increasing from 0 to 1, values
    non-decreasing (repeated values are atoms). What a workload preset stores."""

    probabilities: np.ndarray
    values: np.ndarray
    spec: str = ""

    @staticmethod
    def of(probabilities, values, where: str) -> QuantileTable:
        p = np.asarray(probabilities, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        if p.ndim != 1 or p.shape != v.shape or p.size < 2:
            raise SpecError(f"{where}: quantiles and values must be two lists of the same "
                            "length (at least 2)")
        if not np.all(np.isfinite(p)) or p[0] != 0.0 or p[-1] != 1.0 or np.any(np.diff(p) <= 0):
            raise SpecError(f"{where}: quantiles must rise strictly from 0 to 1")
        if (not np.all(np.isfinite(v)) or np.any(np.diff(v) < 0) or v[0] < 0
                or v[-1] > MOST_TOKENS):
            raise SpecError(f"{where}: values must be non-decreasing, from 0 to "
                            f"{MOST_TOKENS:,.0f} tokens")
        return QuantileTable(probabilities=p, values=v, spec=where)

    @property
    def upper(self) -> float:  # type: ignore[override]
        return float(self.values[-1])

    def survival(self, x):
        x = np.asarray(x, dtype=np.float64)
        p, v = self.probabilities, self.values
        last = np.searchsorted(v, x, side="right") - 1  # last point with value <= x
        inside = (last >= 0) & (last < v.size - 1)
        k = np.clip(last, 0, v.size - 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            rising = p[k] + (p[k + 1] - p[k]) * (x - v[k]) / (v[k + 1] - v[k])
        cdf = np.where(inside, rising, np.where(last < 0, 0.0, 1.0))
        return 1.0 - cdf

    def quantile(self, q):
        return np.interp(q, self.probabilities, self.values)

    def _draw(self, rng, count):
        return np.interp(rng.random(count), self.probabilities, self.values)

    def atoms(self):
        return np.unique(self.values)

    def mean_hint(self):
        return float(np.interp(0.5, self.probabilities, self.values))


# ---------------------------------------------------------------------------------------
# parsing

def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ')'")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("unbalanced '('")
    parts.append(text[start:])
    return [part.strip() for part in parts]


def _parameters(spec: str, body: str, allowed: dict[str, bool]) -> dict[str, str]:
    """`k=v,k=v` into a dict; `allowed` maps each key to whether it is required."""
    try:
        items = _split_top(body) if body else []
    except ValueError as error:
        raise SpecError(f"bad distribution {spec!r}: {error}") from None
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not value.strip():
            raise SpecError(f"bad distribution {spec!r}: expected key=value, got {item!r}")
        if key not in allowed:
            raise SpecError(f"bad distribution {spec!r}: unknown parameter {key!r} "
                            f"(expected {', '.join(allowed)})")
        values[key] = value.strip()
    missing = [key for key, required in allowed.items() if required and key not in values]
    if missing:
        raise SpecError(f"bad distribution {spec!r}: missing {', '.join(missing)}")
    return values


def _positive(spec: str, name: str, text: str, *,
              low: float = limits.BOUNDS["token_scale"].minimum,
              high: float = MOST_TOKENS, closed_low: bool = True,
              closed_high: bool = True) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"bad distribution {spec!r}: {name} must be a number, "
                        f"got {text!r}") from None
    too_low = value < low if closed_low else value <= low
    too_high = value > high if closed_high else value >= high
    if not math.isfinite(value) or too_low or too_high:
        bounds = f"{'[' if closed_low else '('}{low:g}, {high:g}{']' if closed_high else ')'}"
        raise SpecError(f"bad distribution {spec!r}: {name} must be in {bounds}, got {value:g}")
    return value


def _with_cap(distribution: LengthDistribution, params: dict, spec: str) -> LengthDistribution:
    if "cap" not in params:
        return distribution
    cap = _positive(spec, "cap", params["cap"], low=1, closed_low=True)
    return Capped(base=distribution, cap=math.floor(cap), spec=spec)


def read_trace_csv(path: Path) -> dict[str, np.ndarray]:
    """A trace CSV (header `input_tokens,output_tokens[,arrival_s]`, other columns
    ignored) as float64 columns; errors name the file, row and column."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as error:
        raise SpecError(f"{path}: cannot read: {error.strerror or error}") from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise SpecError(f"{path}: empty file") from None
        except (csv.Error, UnicodeDecodeError) as error:
            raise SpecError(f"{path}: not a CSV file: {error}") from None
        wanted = [name for name in (*TRACE_COLUMNS, ARRIVAL_COLUMN) if name in header]
        if not wanted:
            raise SpecError(f"{path}: no {' or '.join(TRACE_COLUMNS)} column in the header "
                            f"{','.join(header)[:80]!r}")
        index = {name: header.index(name) for name in wanted}
        columns: dict[str, list[float]] = {name: [] for name in wanted}
        try:
            for line, row in enumerate(reader, start=2):
                for name, i in index.items():
                    try:
                        columns[name].append(float(row[i]))
                    except (ValueError, IndexError):
                        cell = row[i] if i < len(row) else ""
                        raise SpecError(f"{path}: row {line}, column {name!r}: expected a "
                                        f"number, got {cell!r}") from None
        except (csv.Error, UnicodeDecodeError) as error:
            raise SpecError(f"{path}: not a CSV file: {error}") from None
    return {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}


def check_trace(columns: dict[str, np.ndarray], where: str,
                required: tuple[str, ...] = TRACE_COLUMNS) -> dict[str, np.ndarray]:
    """Validate trace columns: token counts whole and >= 1 (input) or >= 1 (output),
    arrivals finite, >= 0 and non-decreasing."""
    for name in required:
        if name not in columns:
            raise SpecError(f"{where}: no column {name!r} (a trace has "
                            f"{', '.join(TRACE_COLUMNS)} and optionally {ARRIVAL_COLUMN})")
    sizes = {column.size for column in columns.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise SpecError(f"{where}: the trace has no rows" if 0 in sizes
                        else f"{where}: columns of different lengths")
    for name in TRACE_COLUMNS:
        if name in columns:
            column = columns[name]
            bad = np.flatnonzero(~np.isfinite(column) | (column < 1) | (column > MOST_TOKENS)
                                 | (column != np.rint(column)))
            if bad.size:
                raise SpecError(f"{where}: {name} must be whole numbers from 1 to "
                                f"{MOST_TOKENS:,.0f}; row {bad[0] + 1} has {column[bad[0]]!r}")
    if ARRIVAL_COLUMN in columns:
        arrivals = columns[ARRIVAL_COLUMN]
        if not np.all(np.isfinite(arrivals)) or np.any(arrivals < 0):
            raise SpecError(f"{where}: {ARRIVAL_COLUMN} must be finite and >= 0")
        if np.any(np.diff(arrivals) < 0):
            row = int(np.flatnonzero(np.diff(arrivals) < 0)[0]) + 2
            raise SpecError(f"{where}: {ARRIVAL_COLUMN} must not decrease (row {row})")
    return columns


def read_trace(path: Path, reader: TraceReader | None = None,
               required: tuple[str, ...] = TRACE_COLUMNS) -> dict[str, np.ndarray]:
    """Read and validate a trace; `reader` handles formats core cannot (parquet)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise SpecError(f"trace file not found: {path}")
    if reader is None:
        if path.suffix.lower() != ".csv":
            raise SpecError(f"{path}: only CSV traces can be read here; parquet traces are "
                            "read by the `sweep` commands")
        reader = read_trace_csv
    return check_trace(reader(path), str(path), required)


def parse_distribution(spec: str, column: str = "output_tokens",
                       reader: TraceReader | None = None) -> LengthDistribution:
    """A distribution from its spec string (see the module doc). `column` is the trace
    column `empirical:PATH` reads."""
    spec = str(spec).strip()
    kind, sep, body = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "fixed":
        value = _positive(spec, "N", body, low=1, closed_low=True)
        if value != int(value):
            raise SpecError(f"bad distribution {spec!r}: N must be a whole number")
        return Fixed(value=value, spec=spec)
    if kind == "exp":
        params = _parameters(spec, body, {"mean": True, "cap": False})
        mean = _positive(spec, "mean", params["mean"])
        return _with_cap(Exponential(mean_tokens=mean, spec=spec), params, spec)
    if kind == "lognormal":
        params = _parameters(spec, body, {"median": True, "sigma": True, "cap": False})
        median = _positive(spec, "median", params["median"])
        sigma = _positive(spec, "sigma", params["sigma"], low=limits.BOUNDS["sigma"].minimum,
                          high=limits.BOUNDS["sigma"].maximum)
        return _with_cap(Lognormal(median=median, sigma=sigma, spec=spec), params, spec)
    if kind == "bimodal":
        params = _parameters(spec, body, {"p": True, "a": True, "b": True, "cap": False})
        p = _positive(spec, "p", params["p"], low=0, high=1, closed_low=True)
        parts = {}
        for name in ("a", "b"):
            text = params[name]
            if text.startswith("(") and text.endswith(")"):
                parts[name] = parse_distribution(text[1:-1], column, reader)
            else:
                mean = _positive(spec, name, text)
                parts[name] = Exponential(mean_tokens=mean, spec=f"exp:mean={text}")
        mixture = Mixture(p=p, a=parts["a"], b=parts["b"], spec=spec)
        return _with_cap(mixture, params, spec)
    if kind == "empirical":
        if not body.strip():
            raise SpecError(f"bad distribution {spec!r}: expected empirical:PATH")
        columns = read_trace(Path(body.strip()), reader, required=(column,))
        return Empirical.of(columns[column], spec=spec)
    known = "fixed:N, exp:mean=M[,cap=C], lognormal:median=M,sigma=S[,cap=C], " \
            "bimodal:p=P,a=A,b=B[,cap=C], empirical:PATH"
    raise SpecError(f"bad distribution {spec!r}: expected one of {known}")
