"""The Explorer's controls: one row per `ControlSpec`, built from a declarative list.

A control edits one field of `ExplorerSettings`. A valid change posts `Controls.Changed`;
bad input (a negative batch, text in a number field, a value outside the range
`sweep point` accepts: `rooftui.core.limits`) is refused in place: the field is marked, a
message under the controls says what is expected, and nothing is posted, so the figures
keep showing the last valid configuration. The message stays until the field shows a
valid value again, whatever the computations of earlier values say when they land (the
Explorer's warnings and refusals wait behind it). A spec given by path (`rooftui --model PATH`)
is offered beside the shipped ones, labelled by its name and file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.reactive import Reactive
from textual.widgets import Input, Label, Select, Static
from textual.widgets.select import InvalidSelectValueError

from rooftui.core.assumptions import CALIBRATED
from rooftui.core.dtypes import BYTES_PER_ELEMENT
from rooftui.core.errors import SpecError
from rooftui.core.point import PointConfig
from rooftui.core.spec_files import shipped_names
from rooftui.tui.number_fields import ParsedValidator, parse_number
from rooftui.tui.settings import (
    ExplorerSettings,
    cached_gpu,
    cached_model,
    cached_profile,
    cached_system,
)

Choices = Callable[[ExplorerSettings], list[tuple[str, object]]]


LOADERS = {"gpus": cached_gpu, "models": cached_model, "profiles": cached_profile,
           "systems": cached_system}


def _names(kind: str, key: str) -> Choices:
    """The shipped specs, and the one the settings' `key` names when it is not one of
    them (a file or a folder given by path)."""
    def choices(settings: ExplorerSettings) -> list[tuple[str, object]]:
        names = shipped_names(kind)
        current = getattr(settings, key)
        given = [] if current is None or current in names else [
            (_path_label(kind, current), current)]
        return [(name, name) for name in names] + given
    return choices


_shipped_profiles = _names("profiles", "profile")


def _profiles(settings: ExplorerSettings) -> list[tuple[str, object]]:
    """The shipped profiles, then `calibrated`: the GPU's own kernel profile or one
    transferred to it (`sweep point --profile calibrated`)."""
    shipped = [choice for choice in _shipped_profiles(settings) if choice[1] != CALIBRATED]
    return [*shipped, (f"{CALIBRATED} (fitted, for the GPU)", CALIBRATED)]


def _path_label(kind: str, path: str) -> str:
    """The spec's own name and its file, "H100 custom (my-gpu.toml)"; the file (or the
    folder) alone for a config.json, whose name is its path."""
    try:
        name = LOADERS[kind](path).name
    except SpecError:
        return path
    file = Path(path).name
    return file if Path(name) == Path(path) else f"{name} ({file})"


def _default_dtype(settings: ExplorerSettings, attribute: str) -> str:
    """The format the core picks for this GPU and model when the control is left on its
    default (`PointConfig.resolved_weight_dtype` / `resolved_kv_dtype`)."""
    try:
        plain = PointConfig(gpu=cached_gpu(settings.gpu), model=cached_model(settings.model))
    except SpecError:
        return "?"
    return getattr(plain, attribute)


def _dtypes(attribute: str, note: str) -> Choices:
    """The default (None) labelled with what it resolves to, then every other format."""
    def choices(settings: ExplorerSettings) -> list[tuple[str, object]]:
        default = _default_dtype(settings, attribute)
        return [(f"{default} ({note})", None)] + [
            (name, name) for name in BYTES_PER_ELEMENT if name != default]
    return choices


def _kv_heads(settings: ExplorerSettings) -> list[tuple[str, object]]:
    """Every count that divides the query heads, labelled with the group size; the
    model's own count is the None choice (the CLI's omitted --kv-heads)."""
    try:
        model = cached_model(settings.model)
    except SpecError:
        return [("model's", None)]
    heads, own = model.num_attention_heads, model.num_key_value_heads
    return [(f"{kv} (group {heads // kv})", None if kv == own else kv)
            for kv in range(1, heads + 1) if heads % kv == 0]


def _profile_value(key: str) -> Callable[[ExplorerSettings], str]:
    """What a blank field means: the profile's value of `key`."""
    def placeholder(settings: ExplorerSettings) -> str:
        try:
            return f"{getattr(cached_profile(settings.profile, settings.gpu), key):g}"
        except SpecError:
            return ""
    return placeholder


def _pp(settings: ExplorerSettings) -> str:
    """What a blank micro-batches field means: one micro-batch per stage."""
    return str(settings.pp)


@dataclass(frozen=True)
class ControlSpec:
    """One control. `kind`: a `select` of `choices`, or a `number` in the range
    `rooftui.core.limits.BOUNDS[key]` gives the CLI's option of the same name; with
    `blank`, an empty field is None (shown as `placeholder`). `depends_on`: fields whose
    change rebuilds this control's choices or placeholder."""

    key: str  # the ExplorerSettings field it edits
    label: str
    kind: Literal["select", "number"]
    help: str
    choices: Choices | None = None
    blank: bool = False
    depends_on: tuple[str, ...] = ()
    placeholder: Callable[[ExplorerSettings], str] | None = None


CONTROLS: tuple[ControlSpec, ...] = (
    # a system sets the GPU to its own (ExplorerSettings.with_changes)
    ControlSpec("gpu", "GPU", "select", "GPU spec (a system's own while one is chosen)",
                _names("gpus", "gpu"), depends_on=("system",)),
    ControlSpec("model", "model", "select", "Model spec", _names("models", "model")),
    ControlSpec("weight_dtype", "weights", "select", "Weight format",
                _dtypes("resolved_weight_dtype", "model"), depends_on=("model",)),
    ControlSpec("kv_dtype", "KV dtype", "select", "KV-cache format",
                _dtypes("resolved_kv_dtype", "auto"), depends_on=("model",)),
    ControlSpec("batch", "batch", "number", "Decode sequences in the step"),
    ControlSpec("context", "context", "number", "Tokens cached per sequence"),
    ControlSpec("kv_heads", "KV heads", "select", "KV heads (query heads per KV head)",
                _kv_heads, depends_on=("model",)),
    ControlSpec("prefill", "prefill", "number", "Prefill tokens in the step (a chunk)"),
    ControlSpec("profile", "profile", "select", "Assumption profile",
                _profiles),
    ControlSpec("mfu", "MFU", "number", "Fraction of peak FLOP/s (blank: profile's)",
                blank=True, depends_on=("profile", "gpu"), placeholder=_profile_value("mfu")),
    ControlSpec("mbu", "MBU", "number", "Fraction of bandwidth (blank: profile's)",
                blank=True, depends_on=("profile", "gpu"), placeholder=_profile_value("mbu")),
    ControlSpec("tp", "TP", "number", "GPUs one replica is split over (tensor parallel)"),
    ControlSpec("spec_tokens", "spec tok", "number",
                "Speculative decoding: tokens drafted per sequence and step"),
    ControlSpec("acceptance", "accept", "number",
                "Acceptance rate of a drafted token (with spec tokens)", blank=True),
    ControlSpec("draft_model", "draft", "select",
                "Draft model proposing the tokens (none: free, n-gram or lookup)",
                lambda settings: [("none", None)] + _names("models", "draft_model")(settings)),
    ControlSpec("system", "system", "select",
                "System: its GPU replaces the GPU control, and each collective is timed on "
                "the link it crosses (none: the GPU's interconnect, no latency)",
                lambda settings: [("none", None)] + _names("systems", "system")(settings)),
    ControlSpec("pp", "PP", "number", "Pipeline stages, each 1/PP of the layers"),
    ControlSpec("micro_batches", "micro", "number",
                "Micro-batches a step runs over the pipeline (blank: PP)", blank=True,
                depends_on=("pp",), placeholder=_pp),
    ControlSpec("dp", "DP", "number",
                "Data-parallel attention: groups of TP GPUs per stage, each its own batch"),
    ControlSpec("ep", "EP", "number",
                "GPUs the routed experts are split over: 1 or TP × DP (all-to-all)"),
)


def parse(spec: ControlSpec, text: str) -> int | float | None:
    """The value typed into a number field; SpecError saying what is expected if bad."""
    return parse_number(text, spec.key, spec.label, blank=spec.blank)


# Characters that are never part of a number: the Explorer binds them to batch and
# context steps, which must work while a number field has focus.
STEP_KEYS = "[]{}"


class NumberInput(Input):
    """An Input that leaves `keys` (characters never part of a number: the screen binds
    them) to the screen's bindings, and whose text length never re-lays out the screen."""

    # Input sets its virtual size to its text's width on every change, and the base
    # reactive re-lays out the whole screen when that changes (1 -> 2 digits: ~80 ms at
    # 200×50). A one-line field of fixed size only needs a repaint.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def __init__(self, *args, leaves: str = STEP_KEYS, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.leaves = leaves

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return super().check_consume_key(key, character) and character not in self.leaves


def _text(value: int | float | None) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


class Controls(VerticalScroll, can_focus=False):
    """The controls panel; `show(settings)` sets every field without posting changes."""

    class Changed(Message):
        """A valid change: `settings` is the whole new configuration (a model change
        may also have reset the controls that depend on it)."""

        def __init__(self, settings: ExplorerSettings, key: str) -> None:
            super().__init__()
            self.settings = settings
            self.key = key

    def __init__(self, settings: ExplorerSettings, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._settings = settings  # the configuration the Explorer computes
        self._shown = settings  # the configuration the fields display
        self._specs = {spec.key: spec for spec in CONTROLS}
        self._field_errors: dict[str, str] = {}  # key -> why its text is refused
        self._status = Text("")  # the Explorer's word on the last computation

    def compose(self) -> ComposeResult:
        for spec in CONTROLS:
            with Horizontal(classes="control-row"):
                yield Label(spec.label, classes="control-label")
                yield self._field(spec)
        yield Static("", id="control-message")
        yield Static(self._fixed_text(self._settings), id="control-fixed")

    @staticmethod
    def _fixed_text(settings: ExplorerSettings) -> Text:
        fixed = settings.fixed_inputs()
        return Text(f"also set: {', '.join(fixed)} (x: clear)" if fixed else "", style="dim")

    def _field(self, spec: ControlSpec):
        current = getattr(self._settings, spec.key)
        field_id = f"control-{spec.key.replace('_', '-')}"
        if spec.kind == "select":
            return Select(spec.choices(self._settings), value=current, allow_blank=False,
                          compact=True, id=field_id, tooltip=spec.help)
        placeholder = spec.placeholder(self._settings) if spec.placeholder else ""
        return NumberInput(_text(current), placeholder=placeholder, compact=True,
                           id=field_id, tooltip=spec.help,
                           validators=[ParsedValidator(lambda text: parse(spec, text))],
                           validate_on=["changed"])

    def field(self, key: str) -> Input | Select:
        return self.query_one(f"#control-{key.replace('_', '-')}")

    # --- from the user ----------------------------------------------------------------
    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        key = self._key_of(event.select)
        self._post(key, event.value)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        key = self._key_of(event.input)
        try:
            value = parse(self._specs[key], event.value)
        except SpecError as error:
            self._field_errors[key] = (
                f"{error}; still showing {key.replace('_', ' ')} "
                f"{_text(getattr(self._settings, key)) or 'as the profile says'}")
            self._show_message()
            return
        self._field_errors.pop(key, None)
        self._show_message()
        self._post(key, value)

    def _key_of(self, widget: Input | Select) -> str:
        return widget.id.removeprefix("control-").replace("-", "_")

    def _post(self, key: str, value: object) -> None:
        if getattr(self._settings, key) == value:
            return
        self.show_status("")
        self._settings = self._settings.with_changes(**{key: value})
        for spec in CONTROLS:
            if key in spec.depends_on:
                self._refresh_dependent(spec)
        self._shown = self._settings
        self.post_message(self.Changed(self._settings, key))

    # --- from the program -------------------------------------------------------------
    def adopt(self, settings: ExplorerSettings) -> None:
        """Take `settings` as the configuration a field's next change builds on, leaving
        the fields as they are until `show`: a key press shows its new value with the
        figures it gives, in one frame."""
        self._settings = settings

    def show(self, settings: ExplorerSettings, keys: set[str] | None = None) -> None:
        """Put `settings` in the fields, posting nothing (the caller recomputes): every
        field, or only those of `keys` and what depends on them (the others may hold
        what the user is typing). Only what changed is touched: this runs on every batch
        or context key press."""
        previous, self._settings, self._shown = self._shown, settings, settings
        changed = {spec.key for spec in CONTROLS
                   if getattr(previous, spec.key) != getattr(settings, spec.key)}
        for spec in CONTROLS:
            if changed.intersection(spec.depends_on):
                self._refresh_dependent(spec)
            if keys is not None and spec.key not in keys:
                continue
            widget = self.field(spec.key)
            value = getattr(settings, spec.key)
            with widget.prevent(Select.Changed, Input.Changed):
                if spec.kind == "select":
                    if spec.key in changed:
                        self._select(spec, widget, value)
                elif parse_or_none(spec, widget.value) != value:  # also drops refused text
                    widget.value = _text(value)
            self._field_errors.pop(spec.key, None)  # it shows a valid value now
        fixed = self.query_one("#control-fixed", Static)
        text = self._fixed_text(settings)
        if fixed.content != text:
            fixed.update(text)
        self._status = Text("")
        self._show_message()

    def _select(self, spec: ControlSpec, widget: Select, value: object) -> None:
        """Choose `value`; one the select does not offer (a sweep row's spec file) is
        added by rebuilding its choices."""
        try:
            widget.value = value
        except InvalidSelectValueError:
            self._refresh_dependent(spec)

    def show_status(self, message: str, style: str = "red") -> None:
        """The Explorer's word on the last computation (its warnings, or why the core
        refused it), under the controls unless a field's refusal is there."""
        self._status = Text(message, style=style)
        self._show_message()

    def _show_message(self) -> None:
        """The line under the controls: the latest field refusal while any field holds
        refused text, else the status (plain text: user input is never read as markup)."""
        label = self.query_one("#control-message", Static)
        errors = list(self._field_errors.values())
        text = Text(errors[-1], style="red") if errors else self._status
        if label.content != text:  # most key presses leave it empty: no repaint
            label.update(text, layout=False)
            if text:
                self.call_after_refresh(self._reveal_message)

    def _reveal_message(self) -> None:
        """Scroll the message into view (at 80×24 it lies below the last control), but
        never the field being edited out of it. The message's new height is laid out
        only with the next refresh, so the scroll waits for it."""
        def reveal() -> None:
            message = self.query_one("#control-message")
            if self.region.contains_region(message.region):
                return  # in view already: a scroll would repaint the column for nothing
            self.scroll_to_widget(message, animate=False, top=False)
            focused = self.screen.focused
            if focused is not None and self in focused.ancestors:
                self.scroll_to_widget(focused, animate=False)

        self.call_after_refresh(reveal)

    @property
    def settings(self) -> ExplorerSettings:
        return self._settings

    def _refresh_dependent(self, spec: ControlSpec) -> None:
        """Rebuild a select's choices (keeping its value when still offered, else the
        first choice) or a field's placeholder, after a field it depends on changed."""
        widget = self.field(spec.key)
        if spec.placeholder:
            widget.placeholder = spec.placeholder(self._settings)
        if not spec.choices:
            return
        choices = spec.choices(self._settings)
        value = getattr(self._settings, spec.key)
        if value not in {v for _, v in choices}:
            value = choices[0][1]
            self._settings = self._settings.with_changes(**{spec.key: value})
        with widget.prevent(Select.Changed):
            widget.set_options(choices)
            widget.value = value


def parse_or_none(spec: ControlSpec, text: str) -> int | float | None:
    try:
        return parse(spec, text)
    except SpecError:
        return None
