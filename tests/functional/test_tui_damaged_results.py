"""The Results view on a folder with a damaged shard: the shard is left out, never read as
data, and the status line names it (issue 13: the TUI verifies shards as the CLI does)."""

from __future__ import annotations

import os

from click.testing import CliRunner
from test_tui_support import GRID, pilot_test, shown_text, wait_for_results

from rooftui.sweeps.cli import cli
from rooftui.tui.rooftui_app import RooftuiApp


def damaged_results(directory):
    grid = directory / "grid.toml"
    grid.write_text(GRID)
    out = directory / "sweep-demo"
    result = CliRunner().invoke(cli, ["run", str(grid), "--out", str(out), "--shard-size",
                                      "60"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    shard = out / "points" / "shard-000001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the data
    shard.write_bytes(bytes(data))
    # a later damage, as a new process meets it: this process verified the shard when it
    # wrote it, and keeps that verdict while path, inode, size and mtime are unchanged
    stat = shard.stat()
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    return out


@pilot_test
async def test_a_damaged_shard_is_named_and_left_out(tmp_path):
    app = RooftuiApp(damaged_results(tmp_path))
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await wait_for_results(pilot)
        status = shown_text(screen.query_one("#results-status"), width=400)
        assert "rows 1–60 of 60" in status  # only the intact shard's rows
        assert "shard 1 is damaged: its bytes do not match its checksum" in status
        assert app.is_running
