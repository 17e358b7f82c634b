"""One line describing the machine a benchmark ran on, for BENCHMARKS.md."""

from __future__ import annotations

import os
import platform

import numpy as np


def describe_machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} logical CPUs, load {os.getloadavg()[0]:.1f}, "
            f"Python {platform.python_version()}, numpy {np.__version__}, "
            f"{platform.system()} {platform.release()}")
