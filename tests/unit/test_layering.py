"""The headless parts never load the TUI, and `sweep point` starts light."""

from __future__ import annotations

import subprocess
import sys


def loaded_modules(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


def test_core_and_sweeps_load_no_textual():
    modules = loaded_modules("import rooftui.core.point, rooftui.sweeps.cli")
    assert not {m for m in modules if m.split(".")[0] in {"textual", "textual_plot"}}


def test_core_loads_no_polars_altair_or_click():
    modules = loaded_modules("import rooftui.core.point, rooftui.core.closed_forms")
    assert not {m for m in modules if m.split(".")[0] in {"polars", "altair", "click",
                                                           "vl_convert"}}


def test_sweep_point_does_not_load_polars_or_altair():
    modules = loaded_modules(
        "from rooftui.sweeps.cli import main\n"
        "try:\n    main(['point', '--json'])\nexcept SystemExit:\n    pass")
    assert not {m for m in modules if m.split(".")[0] in {"polars", "altair", "vl_convert"}}
