"""When requests arrive: closed, Poisson, Gamma-renewal or a replayed trace.

Spec strings, as `--arrival` takes them:

    closed                  every request waiting at t = 0 (a saturated server)
    poisson:rate=R          exponential gaps, R requests/s
    gamma:rate=R,cv=C       Gamma gaps with mean 1/R and coefficient of variation C
                            (C = 1 is Poisson; C > 1 bursty, C < 1 smoother)
    trace[:speed=X]         the trace's own `arrival_s`, divided by X (X = 2 replays an
                            hour in 30 minutes); the requests keep the trace's lengths, row
                            by row, so lengths and arrivals stay correlated
    trace:PATH[,speed=X]    the same, from the trace file PATH (the `--workload` then);
                            a session or hash-id trace there (`core.sessions`) also
                            brings its turns, think times and prefix blocks

Open processes start with a request at t = 0. Times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftui.core import limits
from rooftui.core.errors import SpecError

KINDS = "closed, poisson:rate=R, gamma:rate=R,cv=C, trace[:PATH][,speed=X]"
BOUNDS_OF = {"rate": "rate", "cv": "interarrival_cv", "speed": "speed"}  # in core.limits


@dataclass(frozen=True)
class Arrivals:
    kind: str  # closed | poisson | gamma | trace
    rate: float | None = None  # requests/s (poisson, gamma)
    cv: float = 1.0  # gamma
    speed: float = 1.0  # trace
    spec: str = "closed"
    path: str | None = None  # trace:PATH

    @property
    def replays_trace(self) -> bool:
        return self.kind == "trace"

    def times(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Arrival times of `count` requests (seconds, non-decreasing, first at 0).
        Trace replay has no times of its own: see `replay`."""
        if self.kind == "closed":
            return np.zeros(count)
        if self.kind == "poisson":
            gaps = rng.exponential(1.0 / self.rate, count)
        elif self.kind == "gamma":
            shape = 1.0 / self.cv ** 2
            gaps = rng.gamma(shape, 1.0 / (self.rate * shape), count)
        else:
            raise SpecError("trace arrivals replay a trace file's arrival_s: give --workload "
                            "PATH with that column")
        return np.concatenate([[0.0], np.cumsum(gaps[:-1])])

    def replay(self, arrival_s: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, row index) of `count` requests replaying a trace's arrivals in order;
        past its last row the trace starts over, shifted by its span plus one mean gap."""
        arrival_s = np.asarray(arrival_s, dtype=np.float64)
        rows = arrival_s.size
        start = arrival_s - arrival_s[0]
        span = start[-1] + (start[-1] / (rows - 1) if rows > 1 else 1.0)
        index = np.arange(count)
        times = start[index % rows] + span * (index // rows)
        return times / self.speed, index % rows


def _parameters(spec: str, body: str, keys: tuple[str, ...]) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or key not in keys:
            raise SpecError(f"bad arrival process {spec!r}: expected {', '.join(keys)} as "
                            f"key=value, got {item!r}")
        try:
            value = float(text)
        except ValueError:
            value = text.strip()  # refused below, with the range
        values[key] = limits.check(BOUNDS_OF[key], value, f"bad arrival process {spec!r}", key)
    return values


def parse_arrivals(spec: str) -> Arrivals:
    spec = str(spec).strip()
    kind, _, body = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "closed" and not body:
        return Arrivals("closed", spec=spec)
    if kind == "poisson":
        values = _parameters(spec, body, ("rate",))
        if "rate" not in values:
            raise SpecError(f"bad arrival process {spec!r}: expected poisson:rate=R")
        return Arrivals("poisson", rate=values["rate"], spec=spec)
    if kind == "gamma":
        values = _parameters(spec, body, ("rate", "cv"))
        if set(values) != {"rate", "cv"}:
            raise SpecError(f"bad arrival process {spec!r}: expected gamma:rate=R,cv=C")
        return Arrivals("gamma", rate=values["rate"], cv=values["cv"], spec=spec)
    if kind == "trace":
        # trace:PATH[,speed=X]: every item that is not speed=X is part of the path
        items = body.split(",")
        keyed = [item for item in items if item.strip().lower().startswith("speed=")]
        path = ",".join(item for item in items if item not in keyed).strip() or None
        values = _parameters(spec, ",".join(keyed), ("speed",))
        return Arrivals("trace", speed=values.get("speed", 1.0), spec=spec, path=path)
    raise SpecError(f"bad arrival process {spec!r}: expected one of {KINDS}")
