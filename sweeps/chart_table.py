"""The step charts' rows as numpy columns (`Table`): what `sweep run` builds its charts
from without importing polars (~0.3 CPU-s a run, on the cores its workers share).

A column is float64 (NaN: null, as a chart's rows have no NaN of their own: `rounded`
makes a value that is not finite null), int64, bool, or `Names` (text as codes into its
sorted distinct names, as a shard stores them: sorting, grouping and filtering compare
integers; an object array of str given to a Table becomes one). The operations are the
few the charts use, each with the semantics of the polars call it replaces:
`first_rows` sorts as polars sorts (names by their text, stable), `derived_columns`
computes the metrics `results.with_derived` adds with the same operations (to the last
bit), and the CSV text (`table_text.csv_text`) is what polars writes. `sweep chart DIR`
scans the folder with polars and hands the slice it collects to the same code
(`Table.from_polars`), so both give one set of pages.

numpy and the standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.core.closed_forms import ridge
from rooftui.sweeps.row_filters import Rows, combination_keys

if TYPE_CHECKING:
    import polars as pl


class Names:
    """A column of text: `codes` into `names`, which are sorted and distinct, so a
    code's order is the text's (as polars sorts names). Indexing, `==` / `!=` against
    one name, `tolist` and `len` behave as on an object array of str."""

    dtype = np.dtype(object)

    def __init__(self, codes: np.ndarray, names: Sequence[str]) -> None:
        self.codes = codes
        self.names = list(names)

    @staticmethod
    def of(values: Iterable[str | None]) -> Names:
        """Names from text (None kept as a name of its own, sorted first)."""
        values = list(values)
        names = sorted(set(values), key=_text_order)
        place = {name: code for code, name in enumerate(names)}
        return Names(np.fromiter((place[v] for v in values), np.int64, len(values)), names)

    @staticmethod
    def coded(codes: np.ndarray, names: Sequence[str]) -> Names:
        """Codes into any list of distinct `names` (a shard's dictionary), renumbered
        into their sorted order."""
        order = sorted(range(len(names)), key=list(names).__getitem__)
        place = np.empty(len(names), np.int64)
        place[order] = np.arange(len(names))
        return Names(place[codes] if len(names) else codes.astype(np.int64),
                     [names[i] for i in order])

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int | np.integer):
            return self.names[self.codes[index]]
        return Names(self.codes[index], self.names)

    def _code(self, name: Any) -> int | None:
        return _index_of(self.names, name)

    def __eq__(self, name: object) -> np.ndarray:  # type: ignore[override]
        code = self._code(name)
        return self.codes == code if code is not None else np.zeros(len(self), bool)

    def __ne__(self, name: object) -> np.ndarray:  # type: ignore[override]
        return ~(self == name)

    __hash__ = None  # type: ignore[assignment]

    def tolist(self) -> list:
        return [self.names[code] for code in self.codes.tolist()]

    @staticmethod
    def concat(columns: Sequence[Names]) -> Names:
        names = columns[0].names
        if all(column.names == names for column in columns):
            return Names(np.concatenate([c.codes for c in columns]), names)
        merged = sorted(set().union(*(c.names for c in columns)), key=_text_order)
        place = {name: code for code, name in enumerate(merged)}
        return Names(np.concatenate([np.asarray([place[n] for n in c.names], np.int64)[c.codes]
                                     if c.names else c.codes for c in columns]), merged)


def _text_order(name: str | None) -> tuple[bool, str]:
    """Names sorted by their text, None first (as polars sorts a null)."""
    return name is not None, name or ""


def _index_of(names: list, name: Any) -> int | None:
    try:
        return names.index(name)
    except ValueError:
        return None


Column = np.ndarray | Names


def column_of(value: Any, height: int) -> Column:
    """`value` as a column of `height` rows: a column as it is (a `Table` makes text
    `Names`), a scalar repeated."""
    if isinstance(value, Names | np.ndarray):
        return value
    if isinstance(value, str) or value is None:
        return Names(np.zeros(height, np.int64), [value])
    if isinstance(value, bool | np.bool_):
        return np.full(height, bool(value))
    if isinstance(value, int | np.integer):
        return np.full(height, value, dtype=np.int64)
    return np.full(height, value, dtype=np.float64)


class Table:
    """Named columns of one length, in order."""

    def __init__(self, columns: Mapping[str, Column] | Iterable[tuple[str, Column]]
                 ) -> None:
        self.data: dict[str, Column] = {
            name: Names.of(values.tolist()) if isinstance(values, np.ndarray)
            and values.dtype.kind in "OU" else values
            for name, values in dict(columns).items()}
        lengths = {len(values) for values in self.data.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self.height = lengths.pop() if lengths else 0
        self._coded: Rows | None = None

    @property
    def columns(self) -> list[str]:
        return list(self.data)

    def __getitem__(self, name: str) -> Column:
        return self.data[name]

    def is_empty(self) -> bool:
        return self.height == 0

    def kind(self, name: str) -> str:
        """numpy's kind of a column: "f", "i", "b" or "O"."""
        return self.data[name].dtype.kind

    def filter(self, mask: np.ndarray) -> Table:
        return self.take(np.flatnonzero(mask))

    def take(self, indices: np.ndarray | Sequence[int]) -> Table:
        indices = np.asarray(indices, dtype=np.int64)
        return Table((name, values[indices]) for name, values in self.data.items())

    def select(self, *names: str, **new: Any) -> Table:
        """`names` in order, then `new` columns (arrays, or scalars repeated)."""
        return Table([(name, self.data[name]) for name in names]
                     + [(name, column_of(value, self.height)) for name, value in new.items()])

    def with_columns(self, **new: Any) -> Table:
        """The columns with `new` ones replacing those of their name in place, the
        others after."""
        return Table({**self.data, **{name: column_of(value, self.height)
                                      for name, value in new.items()}})

    def rename(self, names: Mapping[str, str]) -> Table:
        return Table((names.get(n, n), v) for n, v in self.data.items())

    def sorted_by(self, keys: Sequence[str]) -> Table:
        """The rows sorted by `keys` (the first most significant), stable."""
        if not keys or self.height < 2:
            return self
        return self.take(np.lexsort([_ranks(self.data[k]) for k in reversed(keys)]))

    def unique_index(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the first row of each combination of `keys`, in the order they first
        appear; each row's combination, as a place in that order)."""
        if not self.height:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        codes = _combination_codes([self.data[k] for k in keys])
        first, inverse = np.unique(codes, return_index=True, return_inverse=True)[1:]
        order = np.argsort(first)
        place = np.empty_like(order)
        place[order] = np.arange(len(order))
        return first[order], place[inverse]

    def first_rows(self, keys: Sequence[str], *, sort: bool) -> Table:
        """The first row of each combination of `keys`: sorted by them (`sort`), else in
        the order the combinations first appear."""
        if not keys:
            return self.take([0]) if self.height else self
        first = self.take(self.unique_index(keys)[0])
        # a stable sort's first rows are the first rows, in the sort's order
        return first.sorted_by(keys) if sort else first

    def unique(self, keys: Sequence[str]) -> Table:
        """The distinct combinations of `keys`, in the order they first appear."""
        return self.select(*keys).first_rows(keys, sort=False)

    def coded(self) -> Rows:
        """The rows as a `row_filters` mask reads them (names as codes; made once)."""
        if self._coded is None:
            self._coded = Rows(
                {name: v.codes if isinstance(v, Names) else v for name, v in self.data.items()},
                {name: v.names for name, v in self.data.items() if isinstance(v, Names)})
        return self._coded

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as objects, NaN as None (strict JSON)."""
        lists = {name: [None if value != value else value for value in values.tolist()]
                 if values.dtype.kind == "f" else values.tolist()
                 for name, values in self.data.items()}
        return [dict(zip(lists, row, strict=True)) for row in zip(*lists.values(), strict=True)]

    @staticmethod
    def concat(tables: Sequence[Table]) -> Table:
        """The rows of `tables` (the same columns) one after another."""
        def joined(columns: list[Column]) -> Column:
            if isinstance(columns[0], Names):
                return Names.concat(columns)
            return np.concatenate(columns)

        return Table((name, joined([t.data[name] for t in tables])) for name in tables[0].data)

    def to_polars(self) -> pl.DataFrame:
        """The rows as a polars frame (NaN as null in float columns)."""
        import polars as pl

        return pl.DataFrame([pl.Series(name, values.tolist(), dtype=pl.String)
                             if isinstance(values, Names) else
                             pl.Series(name, values, nan_to_null=values.dtype.kind == "f")
                             for name, values in self.data.items()])

    @staticmethod
    def from_polars(frame: pl.DataFrame) -> Table:
        """A collected polars frame: names (String, Categorical) as `Names` (a null as
        the name None), a null number as NaN (an integer column holding one becomes
        float), a null boolean as False. The charts' rows hold no nulls (the runner
        writes NaN); a NaN sorts and groups as polars sorts and groups a NaN."""
        import polars as pl

        columns = {}
        for name, dtype in frame.schema.items():
            series = frame[name]
            if dtype in (pl.Categorical, pl.String, pl.Enum):
                values = Names.of(series.cast(pl.String).to_list())
            elif dtype == pl.Boolean:
                values = series.fill_null(False).to_numpy().astype(bool)
            elif dtype.is_integer() and not series.has_nulls():
                values = series.to_numpy().astype(np.int64)
            else:
                values = series.cast(pl.Float64).to_numpy().astype(np.float64)
            columns[name] = values
        return Table(columns)


def _ranks(values: Column) -> np.ndarray:
    """What sorts a column as polars sorts it (names by their text; NaN after every
    number)."""
    return values.codes if isinstance(values, Names) else values


def _combination_codes(columns: Sequence[Column]) -> np.ndarray:
    """One integer per row naming its combination of `columns`' values (NaN one value,
    as polars groups nulls)."""
    return combination_keys([(values.codes, len(values.names)) if isinstance(values, Names)
                             else (values, 2) if values.dtype.kind == "b" else (values, None)
                             for values in columns])


def derived_columns(columns: Mapping[str, Column], wanted: Iterable[str]
                    ) -> dict[str, Column]:
    """`columns` (a shard's stored columns) with the derived metrics in `wanted` that
    they lack, computed as `results.with_derived` computes them (a part's
    `*compute_bound` reads its bound word: names as `Names`, not a shard's codes)."""
    found = dict(columns)
    step = columns.get("step_time_s")
    batch = columns.get("batch")
    per_step = columns.get("expected_tokens_per_step")
    if batch is not None:
        new_tokens = batch * per_step if per_step is not None else batch.astype(np.float64)

    def have(*names: str) -> bool:
        return all(name in columns for name in names)

    rules = {
        "ridge": (("peak_flops", "bandwidth_bytes_per_s"),
                  lambda: ridge(columns["peak_flops"], columns["bandwidth_bytes_per_s"])),
        "intensity": (("flops", "bytes"), lambda: columns["flops"] / columns["bytes"]),
        "compute_bound": (("bound",), lambda: columns["bound"] == "compute"),
        "tokens_per_s": (("batch", "step_time_s"), lambda: new_tokens / step),
        "prefill_tokens_per_s": (("prefill", "step_time_s"),
                                 lambda: columns["prefill"] / step),
        "per_user_tokens_per_s": (("batch", "step_time_s"), lambda: np.where(
            batch > 0, (per_step if per_step is not None else 1.0) / step, 0.0)),
        "mfu": (("flops", "step_time_s", "peak_flops"),
                lambda: columns["flops"] / (step * columns["peak_flops"])),
        "mbu": (("bytes", "step_time_s", "bandwidth_bytes_per_s"),
                lambda: columns["bytes"] / (step * columns["bandwidth_bytes_per_s"])),
        "tokens_per_s_per_gpu": (("batch", "step_time_s", "tp"),
                                 lambda: new_tokens / step / columns["tp"]),
    }
    for bound in [n for n in columns if n.endswith("_bound")
                  and not n.endswith("compute_bound")]:
        part = bound.removesuffix("_bound")
        rules[f"{part}_intensity"] = (
            (f"{part}_flops", f"{part}_bytes"),
            (lambda part=part: np.zeros(len(columns[f"{part}_flops"])))
            if part.endswith("activations")
            else (lambda part=part: columns[f"{part}_flops"] / columns[f"{part}_bytes"]))
        rules[f"{part}_compute_bound"] = ((bound,),
                                          lambda bound=bound: columns[bound] == "compute")
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in wanted:
            if name not in found and name in rules and have(*rules[name][0]):
                found[name] = np.asarray(rules[name][1]())
    return found


def positive(table: Table, *names: str) -> np.ndarray:
    """Rows whose `names` are not null and positive (what a log scale can place)."""
    kept = np.ones(table.height, bool)
    for name in names:
        values = table[name]
        kept &= ~np.isnan(values) & (values > 0) if values.dtype.kind == "f" else values > 0
    return kept
