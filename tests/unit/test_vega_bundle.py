"""The Vega bundle cache: keyed by the installed vl-convert's release, and read back
without loading vl-convert (its extension costs a run ~20 ms of the cores its workers
use)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

from rooftui.sweeps.chart_files import _vl_convert_release

READ = """
import sys
from rooftui.sweeps.chart_files import bundle_cache_dir, vega_bundle
bundle = vega_bundle()
print(len(bundle) > 100_000, "vl_convert" in sys.modules, len(list(bundle_cache_dir().iterdir())))
"""


def test_the_cache_is_keyed_by_the_installed_release():
    assert _vl_convert_release() == metadata.version("vl-convert-python")


def test_a_cached_bundle_is_read_without_loading_vl_convert(tmp_path):
    environment = {**os.environ, "ROOFTUI_CACHE_DIR": str(tmp_path)}

    def read() -> list[str]:
        return subprocess.run([sys.executable, "-c", READ], env=environment, check=True,
                              capture_output=True, text=True).stdout.split()

    assert read() == ["True", "True", "1"]  # built with vl-convert, and cached
    assert read() == ["True", "False", "1"]  # read back
