"""A kernel's fixed time depends on how it was timed: CUDA-graph replay, eager launch
timed by CUDA events, or the host clock around the launch and a synchronize."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import TIMERS, fit, predict, row_costs
from rooftui.core.efficiency import Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters
from rooftui.sweeps.measured import read_calibration_csv, to_measurements

H100 = load_gpu("h100-sxm")
TRUE = Efficiency(kernel_overhead_s=3.7e-6, launch_overhead_s=2.6e-6,
                  host_timer_overhead_s=2.4e-5, gemm_mfu=0.78, gemm_mbu=0.86,
                  gemm_m_half=48.0)
TIMINGS = {"cuda_graph": {"cuda_graphs": "true"}, "cuda_events": {"cuda_graphs": "false"},
           "host_clock": {"cuda_graphs": "false", "timer": "host_clock"}}


def gemm_rows(timers=tuple(TIMINGS), times=None) -> list[dict]:
    rows = [{"kind": "gemm", "gpu": "h100-sxm", "m": float(m), "n": float(n), "k": float(k),
             "weight_dtype": "bf16", "time_s": 1.0, "dataset": timer, **TIMINGS[timer]}
            for timer in timers for m in (1, 4, 16, 64, 128, 256, 512, 1024, 4096, 16384)
            for n in (1024, 4096, 14336) for k in (1024, 4096, 8192)]
    for row, seconds in zip(rows, times if times is not None else [], strict=False):
        row["time_s"] = float(seconds)
    return rows


def synthetic(timers=tuple(TIMINGS), efficiency=TRUE):
    rows = to_measurements(gemm_rows(timers))
    times = predict(row_costs(rows, H100, Assumptions()), efficiency)
    return to_measurements(gemm_rows(timers, times))


def test_the_csv_says_how_a_kernel_was_timed(tmp_path: Path):
    rows = to_measurements(gemm_rows())
    assert {TIMERS[code] for code in rows.timer} == set(TIMINGS)
    path = tmp_path / "bad.csv"
    path.write_text("kind,gpu,m,n,k,timer,time_s\ngemm,h100-sxm,1,1024,1024,stopwatch,1e-5\n")
    with pytest.raises(SpecError, match="line 2: timer must be one of cuda_events, "
                                        "host_clock"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,k,time_s\ngemm,h100-sxm,1,1024,1024,1e-5\n")
    unrecorded = to_measurements(read_calibration_csv(path).datasets[0].rows)
    assert TIMERS[unrecorded.timer[0]] == "cuda_events"  # launched eagerly, by default


def test_each_timing_fixed_time_is_informed_only_against_another():
    assert "launch_overhead_s" not in informed_parameters(synthetic(("cuda_events",)))
    assert "launch_overhead_s" not in informed_parameters(synthetic(("cuda_graph",)))
    both = informed_parameters(synthetic(("cuda_graph", "cuda_events")))
    assert "launch_overhead_s" in both and "host_timer_overhead_s" not in both
    every = informed_parameters(synthetic())
    assert {"kernel_overhead_s", "launch_overhead_s", "host_timer_overhead_s"} <= set(every)


def test_fit_recovers_each_timings_fixed_time():
    rows = synthetic()
    free = informed_parameters(rows)
    result = fit(row_costs(rows, H100, Assumptions()), free)
    for name in free:
        assert result.efficiency.value(name) == pytest.approx(TRUE.value(name), rel=0.02), name
    assert result.rms_log_error < 1e-3


def test_a_graph_timed_kernel_is_priced_without_the_launch():
    """The point of the split: a fit on eager and graph-timed data prices a graph-timed
    kernel with the graph replay's fixed time, not the eager one's."""
    rows = synthetic()
    costs = row_costs(rows, H100, Assumptions())
    graph = rows.timer == TIMERS.index("cuda_graph")
    fitted = fit(costs, informed_parameters(rows)).efficiency
    small = graph & (rows.m == 1) & (rows.n == 1024) & (rows.k == 1024)
    assert predict(costs.subset(small), fitted)[0] == pytest.approx(
        predict(costs.subset(small), TRUE)[0], rel=0.01)
    lumped = fit(costs, ["kernel_overhead_s", "gemm_mfu", "gemm_mbu", "gemm_m_half"])
    assert predict(costs.subset(small), lumped.efficiency)[0] > 1.2 * predict(
        costs.subset(small), TRUE)[0]


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 1e-4), st.floats(0.0, 1e-4), st.floats(0.0, 1e-4))
def test_an_eager_or_host_timed_kernel_is_never_faster_than_a_graph_replay(kernel, launch,
                                                                          host):
    efficiency = Efficiency(kernel_overhead_s=kernel, launch_overhead_s=launch,
                            host_timer_overhead_s=host, gemm_mfu=0.7, gemm_mbu=0.8)
    rows = to_measurements(gemm_rows())
    times = predict(row_costs(rows, H100, Assumptions()), efficiency).reshape(3, -1)
    graph, events, host_clock = times
    assert np.all(events >= graph) and np.all(host_clock >= events)
    assert np.allclose(events - graph, launch, rtol=1e-9, atol=1e-15)
    assert np.allclose(host_clock - events, host, rtol=1e-9, atol=1e-15)
