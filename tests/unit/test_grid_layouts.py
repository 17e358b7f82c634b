"""Grid axes pp, ep, dp, micro_batches and system: each point equals `sweep point`'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooftui.core.errors import SpecError
from rooftui.core.point import evaluate_point, named_config
from rooftui.sweeps.evaluate import Sweep
from rooftui.sweeps.grid import parse_grid

WHERE = Path("/virtual/grid.toml")
LAYOUTS = """
name = "layouts"
[fixed]
model = "deepseek-v3"
weight_dtype = "fp8"
context = 2048
[axes]
system = ["gb200-nvl72", "hgx-h200-ib"]
tp = [8, 1, 1]
dp = [1, 8, 16]
ep = [8, 8, 16]
pp = [1, 2]
batch = [1, 64]
[[zip]]
axes = ["tp", "dp", "ep"]
"""


def test_layout_axes_equal_each_point():
    sweep = Sweep(parse_grid(LAYOUTS, WHERE))
    block = next(sweep.grid.blocks(0, sweep.grid.size))
    columns = sweep.evaluate(block, derived=True)
    systems = sweep.dictionaries["system"]
    assert {"all_to_all_time_s", "pipeline_transfer_time_s", "system", "ep", "dp", "pp"} <= set(
        columns)
    for row in range(sweep.grid.size):
        options = {key: int(columns[key][row]) for key in ("tp", "dp", "ep", "pp", "batch")}
        point = evaluate_point(named_config("h100-sxm", "deepseek-v3", "ideal",
                                            system=systems[columns["system"][row]],
                                            weight_dtype="fp8", context=2048, **options))
        for key in ("step_time_s", "tokens_per_s", "all_to_all_bytes", "weight_bytes"):
            assert columns[key][row] == pytest.approx(point.get(key, 0.0), rel=1e-12), key


@pytest.mark.parametrize(("change", "message"), [
    ('ep = [8, 8, 8]', "ep 8 must be 1 or tp x dp"),
    ('gpu = ["h100-sxm"]', "give gpu or system, not both"),
])
def test_bad_layouts_are_one_line_errors(change, message):
    text = LAYOUTS.replace("ep = [8, 8, 16]", change if change.startswith("ep") else
                           "ep = [8, 8, 16]\n" + change)
    with pytest.raises(SpecError, match=message) as caught:
        Sweep(parse_grid(text, WHERE))
    assert "\n" not in str(caught.value)


def test_wide_ep_decode_grid_reproduces_docs_cluster():
    # docs/cluster.md: at >= 125 tok/s per user the NVL72 makes ~4x the tokens per GPU of
    # 8-GPU B200 nodes (wide EP over NVLink, not NICs); at >= 300 a single node's TP 8
    # catches up (within the 8.0 vs 7.7 TB/s of their HBM)
    repo = Path(__file__).resolve().parents[2]
    sweep = Sweep(parse_grid((repo / "specs/grids/wide-ep-decode.toml").read_text(),
                             repo / "specs/grids/wide-ep-decode.toml"))
    columns = sweep.evaluate(next(sweep.grid.blocks(0, sweep.grid.size)), derived=True)
    names = sweep.dictionaries["system"]

    def best(system, floor):
        rows = [i for i in range(sweep.grid.size)
                if names[columns["system"][i]] == system and columns["fits"][i]
                and columns["per_user_tokens_per_s"][i] >= floor]
        return max(columns["tokens_per_s_per_gpu"][i] for i in rows)

    assert best("gb200-nvl72", 125) / best("hgx-b200", 125) == pytest.approx(4.1, abs=0.1)
    assert best("gb200-nvl72", 300) / best("hgx-b200", 300) == pytest.approx(8.0 / 7.7,
                                                                              rel=0.02)
