"""Textual's compositor, drawing a partial update from only the widgets it touches.

For an update, Textual renders every widget that overlaps the bounding box of all the
changed regions. An Explorer change touches the batch field on the left and the figures
on the right: the box is the whole screen, and the ~100 widgets of the controls column
(each with its styles, background and line filters worked out) cost about as much as the
figures and plots that changed. Here the changed regions are grouped into boxes of
overlapping columns (the field; the figures), and only the widgets overlapping a box
are rendered. What reaches the terminal is the same: Textual writes only the cells of
the changed regions, and every such cell lies in a box, so the widget on top there is
among those rendered (a test compares the terminal's picture with a full render).
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.widget import Widget


def column_boxes(regions: Iterable[Region]) -> list[Region]:
    """The regions merged into bounding boxes, one per run of overlapping columns."""
    boxes: list[Region] = []
    for region in sorted(regions, key=lambda region: region.x):
        if boxes and region.x < boxes[-1].right:
            boxes[-1] = boxes[-1].union(region)
        else:
            boxes.append(region)
    return boxes


class ChangedBoxesCompositor(Compositor):
    _boxes: list[Region] | None = None  # while a partial update renders

    def render_partial_update(self) -> ChopsUpdate | None:
        boxes = column_boxes(self._dirty_regions)
        if len(boxes) < 2:  # one box: Textual's own crop
            return super().render_partial_update()
        _ = self.cuts  # the cuts come from every visible widget: computed before the filter
        self._boxes = boxes
        try:
            return super().render_partial_update()
        finally:
            self._boxes = None

    @property
    def visible_widgets(self) -> dict[Widget, tuple[Region, Region]]:
        widgets = super().visible_widgets
        if self._boxes is None:
            return widgets
        boxes = self._boxes
        return {widget: (region, clip) for widget, (region, clip) in widgets.items()
                if any(clip.overlaps(box) and region.overlaps(box) for box in boxes)}
