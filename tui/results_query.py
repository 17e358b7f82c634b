"""What the Results view asks of a sweep's rows: the filters and sort of the table, and
what the plot shows. Plain values (no polars), so the view's widgets load without it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

PAGE_ROWS = 100  # rows the table holds at a time


@dataclass(frozen=True)
class Query:
    """Equality filters per column, a typed filter (`/`: a SQL expression such as
    `batch >= 64 and bound = 'compute'`, or else text any text column contains), and
    one sort key."""

    filters: dict[str, object] = field(default_factory=dict)
    sort: str | None = None
    descending: bool = False
    typed: str = ""

    def with_filter(self, column: str, value: object | None) -> Query:
        filters = {k: v for k, v in self.filters.items() if k != column}
        if value is not None:
            filters[column] = value
        return replace(self, filters=filters)


@dataclass(frozen=True)
class PlotChoice:
    """The plot: metric `y` against axis `x`, coloured by `colour` (None: one colour)."""

    x: str | None
    y: str | None
    colour: str | None
