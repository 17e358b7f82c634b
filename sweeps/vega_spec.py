"""Vega-Lite specs as plain dicts: what the step charts build instead of altair objects
(importing altair and making its objects cost ~0.6 CPU-s a run; these dicts are what
altair's `to_dict` wrote for the same charts, key order aside).

A unit spec holds its rows (a `chart_table.Table`) as `data` while it is built;
`VegaChart` names each table once (`rows-N`, in the order the layers draw them) as
`chart_files` writes it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rooftui.sweeps.chart_table import Table

# the Vega-Lite version the installed altair and vl-convert speak (a test checks it is
# altair's `SCHEMA_VERSION`)
VEGA_LITE_VERSION = "v6.4.1"
SCHEMA_URL = f"https://vega.github.io/schema/vega-lite/{VEGA_LITE_VERSION}.json"
TOP = {"$schema": SCHEMA_URL,
       "config": {"view": {"continuousHeight": 300, "continuousWidth": 300}}}
TYPES = {"N": "nominal", "Q": "quantitative", "O": "ordinal", "T": "temporal"}


def field(shorthand: str, **more: Any) -> dict:
    """A channel from altair's shorthand ("gpu:N", "sum(shown_ms):Q") and its options."""
    name, kind = shorthand.rsplit(":", 1)
    channel: dict[str, Any] = {}
    if name.endswith(")"):
        channel["aggregate"], name = name[:-1].split("(", 1)
    return {**channel, "field": name, "type": TYPES[kind], **more}


def tooltip(shorthand: str, title: str | None = None, format: str | None = None) -> dict:
    return field(shorthand, **({"title": title} if title is not None else {}),
                 **({"format": format} if format is not None else {}))


def mark(kind: str, **options: Any) -> dict:
    return {"type": kind, **options}


def unit(data: Any, mark_spec: dict, encoding: Mapping[str, Any], *,
         transform: Sequence[dict] = (), name: str | None = None, **more: Any) -> dict:
    """One mark's view of `data` (a `chart_table.Table`, or inline `{"values": ...}`)."""
    spec = {"data": data, "mark": mark_spec, "encoding": dict(encoding), **more}
    if transform:
        spec["transform"] = list(transform)
    if name is not None:
        spec["name"] = name
    return spec


def select_param(name: str, value: Any, options: Sequence, label: str) -> dict:
    """A select box bound to the Vega parameter `name`."""
    return {"name": name, "value": value,
            "bind": {"input": "select", "options": list(options), "name": label}}


def checkbox_param(name: str, value: bool, label: str) -> dict:
    return {"name": name, "value": value, "bind": {"input": "checkbox", "name": label}}


def legend_selection(axis: str) -> dict:
    """A point selection on `axis` bound to its legend; `views` names the layer it is
    added to (`with_params`)."""
    return {"name": f"{axis}_legend", "select": {"type": "point", "fields": [axis]},
            "bind": "legend"}


def with_params(view: dict, params: Sequence[dict]) -> dict:
    """`view` holding `params` (lifted to the top by `layer`, `hconcat` and `facet`,
    each selection naming the view it belongs to)."""
    return {**view, "params": [{**p, "views": [view["name"]]} if "select" in p else p
                               for p in params]}


def highlight(selection: dict, *, on: float = 1.0, off: float = 0.12) -> dict:
    """Opacity `on` for the rows `selection` holds, else `off`."""
    return {"condition": [{"param": selection["name"], "value": on}], "value": off}


def highlight_fitting(selection: dict, held: float, *, off: float = 0.12) -> dict:
    """Opacity 1 for selected rows that fit, `held` for selected rows that do not."""
    name = selection["name"]
    return {"condition": [{"test": {"and": [{"param": name}, "datum.fits"]}, "value": 1.0},
                          {"param": name, "value": held}], "value": off}


def when(test: str, then: Any, otherwise: Any) -> dict:
    """A channel whose value is `then` (a value, or a field's channel) where `test`
    holds, else `otherwise`."""
    return {"condition": {"test": test, **(then if isinstance(then, dict) else
                                            {"value": then})}, "value": otherwise}


def _lift_params(views: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    params = [p for view in views for p in view.get("params", [])]
    return [{k: v for k, v in view.items() if k != "params"} for view in views], params


def _lift_data(views: list[dict]) -> tuple[dict, list[dict]]:
    """({"data": frame}, the views without it) when every view draws one frame, else
    ({}, the views), as altair lifts a shared frame."""
    frames = [view.get("data") for view in views]
    if frames[0] is None or any(frame is not frames[0] for frame in frames):
        return {}, views
    return {"data": frames[0]}, [{k: v for k, v in view.items() if k != "data"}
                                 for view in views]


def layer(*layers: dict, **top: Any) -> dict:
    """Layers drawn over each other; their parameters lifted to the layer, one shared
    frame to the layer's own data."""
    layers_, params = _lift_params(layers)
    data, layers_ = _lift_data(layers_)
    spec = {**data, "layer": layers_, **top}
    return {**spec, "params": params} if params else spec


def hconcat(*views: dict, **top: Any) -> dict:
    """Views side by side; every parameter lifted to the top, each named view suffixed
    with its place (as altair names them)."""
    placed, params = [], []
    for index, view in enumerate(views):
        inner, lifted = _lift_params(view.get("layer", []))
        renamed = {v["name"]: f"{v['name']}_{index}" for v in inner if "name" in v}
        inner = [{**v, "name": renamed[v["name"]]} if "name" in v else v for v in inner]
        params += [{**p, "views": [renamed.get(n, n) for n in p["views"]]} if "views" in p
                   else p for p in (*view.get("params", []), *lifted)]
        placed.append({**{k: v for k, v in view.items() if k != "params"}, "layer": inner})
    data, placed = _lift_data(placed)
    return {**data, "hconcat": placed, **top, "params": params}


def facet(view: dict, facet_field: dict, **top: Any) -> dict:
    """`view` drawn once per value of `facet_field`, its data and parameters lifted."""
    (inner,), params = _lift_params([view])
    data = inner.pop("data")
    return {"data": data, "facet": facet_field, "spec": inner, **top, "params": params}


def title(text: str, subtitle: Sequence[str]) -> dict:
    return {"text": text, "subtitle": list(subtitle), "anchor": "start"}


class VegaChart:
    """A Vega-Lite spec whose data are `chart_table.Table`s, named `rows-N`."""

    def __init__(self, spec: dict) -> None:
        self.frames: dict[str, Table] = {}
        names: dict[int, str] = {}

        def named(node: Any) -> Any:
            if isinstance(node, dict):
                return {k: named_data(v) if k == "data" else named(v)
                        for k, v in node.items()}
            return [named(v) for v in node] if isinstance(node, list) else node

        def named_data(data: Any) -> Any:
            if isinstance(data, dict):
                return data
            name = names.setdefault(id(data), f"rows-{len(names)}")
            self.frames[name] = data
            return {"name": name}

        self.spec = {**TOP, **named(spec)}

    def spec_dict(self) -> dict:
        """The spec, its data as references (`{"name": "rows-N"}`) to `frames` (a
        copy: writing it gives each reference its format)."""
        return copy.deepcopy(self.spec)

    def to_dict(self, validate: bool = True) -> dict:
        """The spec with its frames inline as `datasets` (rows), checked against the
        Vega-Lite schema when `validate` (as altair's `to_dict`)."""
        spec = self.spec_dict()
        if self.frames:
            spec["datasets"] = {name: frame.to_dicts() for name, frame in self.frames.items()}
        if validate:
            import jsonschema
            from altair.vegalite.v6.schema import core

            jsonschema.validate(spec, core.load_schema())
        return spec


def note_chart(text: str, reason: str, width: int) -> VegaChart:
    """A chart that says why there is nothing to draw, rather than failing the render."""
    return VegaChart(unit({"values": [{"message": reason}]}, mark("text", size=14),
                          {"text": field("message:N")}, name="note", title=text,
                          width=width, height=80))
