"""Step fits over several machines: each machine's fixed times are its own, the
efficiencies shared, and a fit recovers both from synthetic steps made that way."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import Machines, RowCosts, fit, predict, row_costs
from rooftui.core.efficiency import Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters, machine_fit_parameters
from rooftui.sweeps.measured import read_measured_paths, to_measurements, write_calibration_csv
from rooftui.sweeps.validation import build_corpus, hold_out

SHARED = {"gemm_mfu": 0.7, "gemm_mbu": 0.85, "attention_mbu": 0.6, "attention_mfu": 0.4,
          "interconnect_efficiency": 0.5}
# what each machine's host adds: per step, per all-reduce, per all-reduce and peer
OWN = {"h100-sxm": {"step_overhead_s": 2e-3, "allreduce_overhead_s": 1e-5,
                    "allreduce_peer_overhead_s": 5e-6},
       "a100-80gb": {"step_overhead_s": 5e-3, "allreduce_overhead_s": 2e-5,
                     "allreduce_peer_overhead_s": 1.5e-5}}
DEGREES = (1, 2, 4, 8)  # with TP 1 (no all-reduce) the all-reduce's fixed time is told apart


def step_rows(gpu: str, degrees=(2, 4, 8), model="llama-3.1-8b") -> list[dict]:
    rows = []
    for tp in degrees:
        dataset = f"{gpu} {model} tp{tp}"
        for batch in (1, 4, 16, 64):
            for context in (512.0, 2048.0):
                rows.append({"kind": "step", "gpu": gpu, "model": model, "tp": float(tp),
                             "batch": float(batch), "context": context, "time_s": 1.0,
                             "weight_dtype": "fp16", "dataset": dataset})
        for prefill in (512.0, 2048.0, 8192.0):
            rows.append({"kind": "step", "gpu": gpu, "model": model, "tp": float(tp),
                         "batch": 0.0, "prefill": prefill, "time_s": 1.0,
                         "weight_dtype": "fp16", "dataset": dataset})
    return rows


def machine_corpus():
    """Synthetic steps of two machines, each timed under its own fixed times."""
    rows = [row for gpu in OWN for row in step_rows(gpu, DEGREES)]
    costs = []
    for gpu in OWN:
        mine = [row for row in rows if row["gpu"] == gpu]
        truth = Efficiency().with_values({**SHARED, **OWN[gpu]})
        seconds = predict(_costs(mine, gpu), truth)
        for row, time_s in zip(mine, seconds, strict=True):
            row["time_s"] = float(time_s)
        costs.append(_costs(mine, gpu))
    measurements = to_measurements(rows, sorted({row["dataset"] for row in rows}))
    merged = RowCosts(**{f.name: np.concatenate([getattr(c, f.name) for c in costs])
                         for f in fields(RowCosts)})
    merged = replace(merged, dataset=measurements.dataset)
    labels = np.array([row["gpu"] for row in rows])
    return measurements, merged, labels


def _costs(rows: list[dict], gpu: str) -> RowCosts:
    return row_costs(to_measurements(rows), load_gpu(gpu), Assumptions())


def test_each_machine_owns_the_fixed_times_its_steps_tell_apart():
    rows = to_measurements(step_rows("h100-sxm", (2,)) + step_rows("h200", (2, 4))
                           + step_rows("a100-80gb", (1, 2, 4))
                           + step_rows("a100-80gb", (8,), model="llama-2-70b"))
    labels = np.array(["h100"] * 11 + ["h200"] * 22 + ["a100"] * 44)
    shared, machines = machine_fit_parameters(rows, labels)
    assert machines.names == ("h100", "h200", "a100")
    # one degree: no time per peer; every step with all-reduces (a model pays the same
    # number each step): their fixed time is one number with the step's
    assert machines.own == (("step_overhead_s",),
                             ("step_overhead_s", "allreduce_peer_overhead_s"),
                             ("step_overhead_s", "allreduce_overhead_s",
                              "allreduce_peer_overhead_s"))
    assert not {"step_overhead_s", "allreduce_overhead_s"} & set(shared)
    assert "layer_overhead_s" in shared  # the A100's two models differ in depth
    one_depth = to_measurements(step_rows("h100-sxm") + step_rows("a100-80gb"))
    shared, _ = machine_fit_parameters(one_depth, np.array(["h100"] * 33 + ["a100"] * 33))
    assert "layer_overhead_s" not in shared  # else one number with each step overhead


def test_a_machine_fit_recovers_each_machines_fixed_times_and_the_shared_efficiencies():
    rows, costs, labels = machine_corpus()
    shared, machines = machine_fit_parameters(rows, labels)
    result = fit(costs, shared, machines=machines)
    assert result.rms_log_error < 1e-3
    for gpu, truth in OWN.items():
        efficiency = result.machine_efficiencies[machines.names.index(gpu)]
        for name, value in {**SHARED, **truth}.items():
            assert efficiency.value(name) == pytest.approx(value, rel=0.03), (gpu, name)


def test_one_set_of_fixed_times_cannot_fit_both_machines():
    rows, costs, _ = machine_corpus()
    pooled = fit(costs, informed_parameters(rows))
    assert pooled.rms_log_error > 0.03


def test_machines_owning_nothing_fit_as_one():
    """Rows split between two machines that own no parameter: the split prediction is
    the plain fit's."""
    rows, costs, _ = machine_corpus()
    free = informed_parameters(rows)
    plain = fit(costs, free)
    split = fit(costs, free, machines=Machines(
        (np.arange(len(rows)) % 2).astype(np.int64), ("even", "odd"), ((), ())))
    assert split.efficiency == plain.efficiency
    assert split.machine_efficiencies == (plain.efficiency, plain.efficiency)
    assert split.rms_log_error == pytest.approx(plain.rms_log_error, rel=1e-9)
    assert plain.machine_efficiencies == ()


def test_machines_must_match_their_rows():
    with pytest.raises(SpecError, match="machines but"):
        Machines(np.zeros(3, dtype=np.int64), ("a", "b"), ((),))
    with pytest.raises(SpecError, match="outside 0-1"):
        Machines(np.array([0, 2]), ("a", "b"), ((), ()))
    rows, costs, _ = machine_corpus()
    with pytest.raises(SpecError, match="machine codes for"):
        fit(costs, ["gemm_mbu"], machines=Machines.one(3))


def test_a_held_out_machine_without_all_reduces_to_learn_from_is_pooled(tmp_path):
    """Held out, a machine's TP2 steps are not predicted from its TP1 steps alone (no
    all-reduce there to price theirs): they take the pooled fit, and say so."""
    rows = []
    for gpu, engine, degrees in (("h100-sxm", "x", (1, 2)), ("a100-80gb", "y", (1, 2, 4))):
        truth = Efficiency().with_values({**SHARED, **OWN["h100-sxm"]})
        for tp in degrees:
            mine = [{**row, "engine": engine, "dataset": f"{engine} tp{tp}"}
                    for row in step_rows(gpu, (tp,))]
            seconds = predict(_costs(mine, gpu), truth)
            rows += [{**row, "time_s": float(t)} for row, t in zip(mine, seconds, strict=True)]
    path = tmp_path / "steps.csv"
    write_calibration_csv(rows, path)
    corpus, _ = build_corpus(read_measured_paths([path]))
    notes = {result.group: result.notes for result in hold_out(corpus, "dataset")}
    assert notes["x tp2"] == ["step: no other step with all-reduces of h100-sxm under x; "
                              "fixed times pooled over the other machines"]
    assert all(not notes[name] for name in ("x tp1", "y tp1", "y tp2", "y tp4"))
