"""Reading what a user typed into a number field, with the CLI's bounds (`core.limits`).

Every numeric field of the TUI parses through `parse_number`, so a field accepts exactly
what the matching `sweep` option accepts, and anything else (NaN, ±inf, 1e308, a negative
count, 99999999999999999999, text) is a SpecError that names the field and states the
range, shown in place instead of entering the core.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.validation import ValidationResult, Validator

from rooftui.core.errors import SpecError
from rooftui.core.limits import BOUNDS

# Longer than any number a bound admits written out; a longer text is refused before
# `int` (which refuses 4,300 digits with its own error) or the range check sees it.
MAX_CHARACTERS = 40
SHOWN_CHARACTERS = 24  # of refused text, in the message


def parse_number(text: str, name: str, label: str, *, blank: bool = False) -> int | float | None:
    """The number `text` holds, checked against BOUNDS[name]: an int for a whole-number
    bound, else a float; None for a blank field when `blank`. Thousands separators (`,`
    `_`) are allowed. Refused: a SpecError naming `label` and the accepted range."""
    bound = BOUNDS[name]
    cleaned = text.strip().replace(",", "").replace("_", "")
    if blank and not cleaned:
        return None
    value = _number(cleaned)
    if value is None:
        shown = text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "…"
        wanted = bound.describe() + (", or blank" if blank else "")
        raise SpecError(f"{label} must be {wanted}, got {shown!r}")
    return bound.check(value, label)


def parse_numbers(text: str, name: str, label: str) -> list[int | float]:
    """A comma-separated list, each item as `parse_number`; at least one."""
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise SpecError(f"{label}: expected numbers separated by commas, got {text!r}")
    return [parse_number(item, name, label) for item in items]


def _number(text: str) -> int | float | None:
    """An int or a float (`1e3`, `nan` included: the bound judges it), or None for text
    that is not a number written in ASCII (`int` would take other scripts' digits)."""
    if not text or len(text) > MAX_CHARACTERS or not text.isascii():
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


class ParsedValidator(Validator):
    """Marks an Input invalid (red) with the message of `parse(text)`'s SpecError."""

    def __init__(self, parse: Callable[[str], object]) -> None:
        super().__init__()
        self.parse = parse

    def validate(self, value: str) -> ValidationResult:
        try:
            self.parse(value)
        except SpecError as error:
            return self.failure(str(error))
        return self.success()
