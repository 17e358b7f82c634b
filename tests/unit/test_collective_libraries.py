"""All-reduce parameters per collective library (NCCL, TensorRT-LLM's custom all-reduce)
and a fixed time per peer: what a profile holds, what a step pays, what a fit recovers,
and what a held-out dataset of one library is predicted from."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions, assumptions_from_dict, load_profile
from rooftui.core.calibration import KINDS, Measurements, fit, predict, row_costs
from rooftui.core.efficiency import (
    COLLECTIVE_PARAMETERS,
    COLLECTIVE_TABLES,
    Efficiency,
    collective_library_code,
)
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from tests.conftest import sweep, sweep_json

H100 = load_gpu("h100-sxm")
LLAMA_70B = load_model("llama-3-70b")

# the measured ranges (aiconfigurator, H100/H200): a fixed time of 2-5 us and per peer
# 1/12 (TensorRT-LLM) to 1/3 (NCCL) of it; a fit's weak prior (PRIOR_WEIGHT) moves a
# per-peer time far below that by percents
fractions = st.floats(0.2, 0.99)
fixed_times = st.floats(1e-6, 1e-5)
peer_shares = st.floats(0.08, 1.0)
# a fit takes seconds: shrinking a failure would take many minutes
FITS = settings(deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))


# one protocol's parameters (the two-protocol ones: tests/unit/test_allreduce_protocols.py)
ONE_PROTOCOL = ("interconnect_efficiency", "allreduce_overhead_s", "allreduce_peer_overhead_s")


def _libraries(draw_values) -> Efficiency:
    """An efficiency whose base and per-library all-reduce parameters all differ."""
    (base, nccl, trtllm) = draw_values
    return Efficiency().with_values({
        **dict(zip(ONE_PROTOCOL, base, strict=True)),
        **{f"nccl.{n}": v for n, v in zip(ONE_PROTOCOL, nccl, strict=True)},
        **{f"trtllm.{n}": v for n, v in zip(ONE_PROTOCOL, trtllm, strict=True)}})


triples = st.tuples(fractions, fixed_times, peer_shares).map(
    lambda t: (t[0], t[1], t[1] * t[2]))
libraries = st.tuples(triples, triples, triples).map(_libraries)
# and two protocols, in the measured ranges: the bulk one at 0.2-0.9 of the bandwidth
# (fits: 0.74-0.80), a time per peer 0.08-0.35 of the fixed one, the low-latency one at
# 0.3-0.6 of the bulk one's bandwidth (0.41 NCCL, 0.45-0.48 TensorRT-LLM), the bulk one
# 10-30 us more (14.5 and 22-26 us), so that one hands over to the other between 0.1 and
# 10 MB, inside the rows' messages. (Outside them, with five parameters a library, the
# fit's weak prior moves the least determined by a few percent: see
# test_without_the_prior_a_fit_recovers_two_protocols_anywhere.)
quintuples = st.tuples(st.floats(0.2, 0.9), fixed_times, st.floats(0.08, 0.35),
                       st.floats(0.3, 0.6), st.floats(1e-5, 3e-5)).map(
    lambda t: (t[0], t[1], t[1] * t[2], *t[3:]))


def _two_protocol_libraries(draw_values) -> Efficiency:
    """An efficiency whose base and per-library all-reduce parameters, two protocols'
    included, all differ."""
    return Efficiency().with_values({
        f"{table}{name}": value for table, values in zip(("", "nccl.", "trtllm."), draw_values,
                                                         strict=True)
        for name, value in zip(COLLECTIVE_PARAMETERS, values, strict=True)})


two_protocol_libraries = st.tuples(quintuples, quintuples, quintuples).map(
    _two_protocol_libraries)


def _step(assumptions: Assumptions, tp: int, batch: int) -> float:
    config = PointConfig(gpu=H100, model=LLAMA_70B, batch=batch, context=2048, tp=tp,
                         assumptions=assumptions)
    return evaluate_point(config)["step_time_s"]


@settings(max_examples=25, deadline=None)
@given(libraries, st.sampled_from(["", *COLLECTIVE_TABLES]), st.sampled_from([2, 4, 8]),
       st.integers(1, 256))
def test_a_step_pays_its_librarys_all_reduce_time(efficiency, library, tp, batch):
    chosen = Assumptions(efficiency=efficiency, collective_library=library)
    # the same step with that library's values as the base ones, and no tables
    values = {n: efficiency.value(f"{library}.{n}" if library else n)
              for n in COLLECTIVE_PARAMETERS}
    plain = Assumptions(efficiency=Efficiency().with_values(values))
    assert _step(chosen, tp, batch) == _step(plain, tp, batch)
    # the per-peer time: 2 all-reduces per layer and the logits' gather, tp - 1 peers each
    peer = values["allreduce_peer_overhead_s"]
    without_peer = Assumptions(efficiency=Efficiency().with_values(
        {**values, "allreduce_peer_overhead_s": 0.0}))
    collectives = 2 * LLAMA_70B.num_hidden_layers + 1
    paid = _step(plain, tp, batch) - _step(without_peer, tp, batch)
    assert paid == pytest.approx(collectives * (tp - 1) * peer, rel=1e-6)


@settings(max_examples=20, deadline=None)
@given(libraries, st.sampled_from([2, 4, 8]), st.integers(1, 256))
def test_unselected_tables_change_nothing_bit_for_bit(efficiency, tp, batch):
    base = Efficiency().with_values({n: efficiency.value(n) for n in COLLECTIVE_PARAMETERS})
    assert _step(Assumptions(efficiency=efficiency), tp, batch) == _step(
        Assumptions(efficiency=base), tp, batch)


def test_a_zero_peer_time_is_todays_step_bit_for_bit():
    efficiency = Efficiency(interconnect_efficiency=0.63, allreduce_overhead_s=1.1e-5)
    assert efficiency == efficiency.with_values({"allreduce_peer_overhead_s": 0.0})
    for tp in (2, 4, 8):
        step = _step(Assumptions(efficiency=efficiency), tp, 32)
        ideal = _step(Assumptions(), tp, 32)
        assert step > ideal


def _allreduce_rows(truth: Efficiency, libraries_gpus: list[tuple[str, str]]) -> Measurements:
    """Synthetic all-reduce rows of each (library, dataset name) over 2, 4, 8 GPUs and
    messages from 1 kB to 256 MB, timed exactly by `truth`."""
    tp, message, library, dataset = [], [], [], []
    for index, (name, _) in enumerate(libraries_gpus):
        for gpus in (2, 4, 8):
            for size in np.geomspace(1e3, 2.56e8, 12):
                tp.append(gpus)
                message.append(size)
                library.append(collective_library_code(name))
                dataset.append(index)
    count = len(tp)
    zeros = np.zeros(count)
    rows = Measurements(
        kind=np.full(count, KINDS.index("allreduce")), model=np.full(count, -1), models=(),
        tp=np.array(tp, dtype=float), batch=zeros, context=zeros, prefill=zeros,
        prefill_context=zeros, prompts=zeros, m=zeros, n=zeros, k=zeros,
        message_bytes=np.array(message), dtype=np.zeros(count, dtype=int),
        kv_dtype=np.zeros(count, dtype=int), time_s=np.ones(count),
        dataset=np.array(dataset), datasets=tuple(d for _, d in libraries_gpus),
        library=np.array(library))
    costs = row_costs(rows, H100, Assumptions())
    return replace(rows, time_s=predict(costs, truth))


@settings(FITS, max_examples=6)
@given(two_protocol_libraries)
def test_a_fit_recovers_each_librarys_parameters(truth):
    rows = _allreduce_rows(truth, [("nccl", "nccl"), ("trtllm", "trtllm")])
    free = informed_parameters(rows)
    assert set(free) == {f"{t}.{n}" for t in COLLECTIVE_TABLES for n in COLLECTIVE_PARAMETERS}
    fitted = fit(row_costs(rows, H100, Assumptions()), free)
    for name in free:
        assert fitted.efficiency.value(name) == pytest.approx(truth.value(name), rel=0.01), name
    # no row without a library: the base values follow the library with the most rows
    # (a tie: the first), so a profile's steps pay a fitted library by default
    for name in COLLECTIVE_PARAMETERS:
        assert fitted.efficiency.value(name) == fitted.efficiency.value(f"nccl.{name}")


@pytest.mark.parametrize("nccl, trtllm", [
    # outside the measured ranges, where the prior moved a fit by 0.6-2 %: an efficiency
    # near 1 and a small bulk time; a share beside 61 us of peer times at 8 GPUs
    ((0.417, 5.1e-6, 1.79e-6, 0.49, 2.94e-5), (0.975, 4.98e-6, 4.62e-6, 0.495, 2.02e-5)),
    ((0.201, 3.29e-6, 1.51e-6, 0.463, 2e-5), (0.349, 9.53e-6, 8.75e-6, 0.339, 1e-5))])
def test_without_the_prior_a_fit_recovers_two_protocols_anywhere(nccl, trtllm, monkeypatch):
    """The two protocols are told apart by the rows alone: what is left is the prior's."""
    import rooftui.core.calibration as calibration

    truth = _two_protocol_libraries((nccl, nccl, trtllm))
    rows = _allreduce_rows(truth, [("nccl", "nccl"), ("trtllm", "trtllm")])
    monkeypatch.setattr(calibration, "PRIOR_WEIGHT", 0.0)
    free = informed_parameters(rows)
    fitted = fit(row_costs(rows, H100, Assumptions()), free)
    for name in free:
        assert fitted.efficiency.value(name) == pytest.approx(truth.value(name), rel=1e-3), name


def test_the_per_peer_time_needs_two_gpu_counts():
    truth = _libraries(((0.8, 1e-5, 1e-6),) * 3)
    rows = _allreduce_rows(truth, [("nccl", "nccl")])
    one_count = rows.subset(rows.tp == 4)
    assert "nccl.allreduce_peer_overhead_s" in informed_parameters(rows)
    assert "nccl.allreduce_peer_overhead_s" not in informed_parameters(one_count)
    assert "nccl.allreduce_overhead_s" in informed_parameters(one_count)


def test_a_held_out_library_is_predicted_from_its_own_rows():
    """Hold one library's dataset on one GPU out: the fit on the rest prices it with that
    library's rows from the other dataset; one set of parameters for both could not."""
    truth = _libraries(((1.0, 0.0, 0.0), (0.7, 4.65e-6, 1.55e-6), (0.55, 2.4e-6, 2e-7)))
    datasets = [("nccl", "nccl a"), ("nccl", "nccl b"), ("trtllm", "trtllm a"),
                ("trtllm", "trtllm b")]
    rows = _allreduce_rows(truth, datasets)
    held = rows.dataset == 2

    def held_out_error(rows: Measurements) -> float:
        costs = row_costs(rows, H100, Assumptions())
        fitted = fit(costs.subset(~held), informed_parameters(rows.subset(~held)))
        predicted = predict(costs.subset(held), fitted.efficiency)
        return float(np.mean(np.abs(predicted / rows.time_s[held] - 1.0)))

    assert held_out_error(rows) < 0.01
    assert held_out_error(replace(rows, library=np.zeros(len(rows), dtype=int))) > 0.1


def test_a_profile_refuses_a_library_it_has_no_table_for():
    with pytest.raises(SpecError, match=r"no \[efficiency.trtllm\] table"):
        assumptions_from_dict({"collective_library": "trtllm",
                               "efficiency": {"nccl": {"allreduce_overhead_s": 1e-5}}},
                              "test.toml", "test")
    with pytest.raises(SpecError, match="must be one of nccl, trtllm"):
        assumptions_from_dict({"collective_library": "mpi"}, "test.toml", "test")
    with pytest.raises(SpecError, match="'allreduce_peer_overhead_s' must be a number in"):
        assumptions_from_dict({"efficiency": {"trtllm": {"allreduce_peer_overhead_s": -1e-6}}},
                              "test.toml", "test")
    with pytest.raises(SpecError, match="gemm_mfu"):  # a library table holds all-reduce only
        assumptions_from_dict({"efficiency": {"nccl": {"gemm_mfu": 0.5}}}, "test.toml", "test")
    chosen = assumptions_from_dict({"collective_library": "trtllm", "efficiency": {
        "trtllm": {"allreduce_overhead_s": 3e-6}}}, "test.toml", "test")
    assert chosen.step_efficiency.allreduce_overhead_s == 3e-6
    assert chosen.efficiency.allreduce_overhead_s == 0.0


def test_sweep_point_refuses_an_unfitted_library_in_one_line():
    _, err = sweep("point", "--model", "llama-3-70b", "--tp", "4", "--collective-library",
                   "trtllm", expect=2)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "no [efficiency.trtllm] table" in lines[0], err
    assert "Traceback" not in err


def test_sweep_point_shows_and_applies_the_library():
    kernels = load_profile("h100-sxm-kernels")
    tables = [t for t in COLLECTIVE_TABLES if kernels.efficiency.has_collective_table(t)]
    assert tables, "the kernel profile has per-library all-reduce tables"
    default = sweep_json("point", "--gpu", "h100-sxm", "--model", "llama-3-70b", "--tp", "4", "--profile",
                         "h100-sxm-kernels")
    assert default["assumptions"]["collective_library"] is None
    assert "assumptions.collective_library" in default["null_reasons"]
    for table in tables:
        chosen = sweep_json("point", "--gpu", "h100-sxm", "--model", "llama-3-70b", "--tp", "4", "--profile",
                            "h100-sxm-kernels", "--collective-library", table)
        assert chosen["assumptions"]["collective_library"] == table
        assert chosen["step_time_s"] == pytest.approx(_kernel_step(kernels, table), rel=1e-12)
    text, _ = sweep("point", "--gpu", "h100-sxm", "--model", "llama-3-70b", "--tp", "4", "--profile",
                    "h100-sxm-kernels", "--collective-library", tables[-1])
    assert f"all-reduce {tables[-1]}" in text.splitlines()[0]


def _kernel_step(kernels: Assumptions, table: str) -> float:
    """The step under the kernel profile rebuilt without library tables, `table`'s
    all-reduce values as its base ones."""
    values = {n: v for n, v in kernels.efficiency.as_dict().items()
              if n.partition(".")[0] not in COLLECTIVE_TABLES}
    values.update({n: kernels.efficiency.value(f"{table}.{n}") for n in COLLECTIVE_PARAMETERS})
    plain = replace(kernels, efficiency=Efficiency().with_values(values))
    config = PointConfig(gpu=H100, model=LLAMA_70B, batch=1, context=1024, tp=4,
                         assumptions=plain)
    return evaluate_point(config)["step_time_s"]


def test_the_cli_choices_are_the_libraries_with_tables():
    from rooftui.sweeps.cli.point import point

    option = next(p for p in point.params if p.name == "collective_library")
    assert tuple(option.type.choices) == COLLECTIVE_TABLES


def test_held_out_aiconfigurator_all_reduce_uses_its_librarys_fit(shared_dir: Path):
    from rooftui.sweeps.measured import read_measured_paths
    from rooftui.sweeps.validation import build_corpus, hold_out

    path = shared_dir / "reference" / "measured" / "aiconfigurator-allreduce-h100-h200.csv"
    if not path.is_file():
        pytest.skip(f"no all-reduce measurements at {path}")
    corpus, _ = build_corpus(read_measured_paths([path]))
    for result in hold_out(corpus, "dataset"):
        measured = corpus.rows.time_s[result.rows]
        mape = float(np.mean(np.abs(result.predicted_s / measured - 1.0)))
        # one set of parameters for both libraries: 28-29 % (NCCL), 110-112 % (TensorRT-LLM);
        # one protocol each: 13.0-13.6 % and 18.3-18.6 %; two: 7.3-7.6 % and 13.1-13.8 %
        assert mape < 0.15, (result.group, mape)


@pytest.mark.parametrize("pooled", [True, False])
def test_a_held_out_library_is_priced_by_a_fit_on_every_other_librarys_rows(pooled,
                                                                            monkeypatch):
    """`--holdout engine` with NCCL held out: its rows have no table to be fitted on, so
    they take the base values, fitted on every other all-reduce row (TensorRT-LLM's and
    those naming no library). From the latter alone (here one GPU count and two sizes,
    as LLMCompass' rows) the base values lack a time per peer."""
    from rooftui.sweeps import validation

    truth = _libraries(((0.7, 5e-6, 1.5e-6),) * 3)  # every library alike
    rows = _allreduce_rows(truth, [("nccl", "nccl"), ("trtllm", "trtllm"), ("", "plain")])
    sizes = np.unique(rows.message_bytes)[[3, 9]]
    keep = (rows.dataset < 2) | ((rows.tp == 4) & np.isin(rows.message_bytes, sizes))
    rows = rows.subset(keep)
    corpus = validation.Corpus(
        rows=rows, costs=row_costs(rows, H100, Assumptions()), names=list(rows.datasets),
        gpus=["h100-sxm"] * 3, engines=["nccl", "trtllm", "PyTorch"], sources=[""] * 3,
        kind_group=np.full(len(rows), "allreduce"), dtype=np.full(len(rows), "bf16"))
    if not pooled:
        monkeypatch.setattr(validation, "_libraries_pooled", lambda corpus, *_: corpus)
    nccl = next(r for r in validation.hold_out(corpus, "engine") if r.group == "nccl")
    error = float(np.mean(np.abs(nccl.predicted_s / rows.time_s[nccl.rows] - 1.0)))
    if pooled:
        assert error < 0.01
    else:
        assert error > 0.1


def test_sweep_point_names_the_protocol_that_timed_the_all_reduces():
    """Under a profile with two protocols: a decode of one sequence sends 16 kB a
    collective (the low-latency one), of 512 sequences 8 MB (the bulk one); a profile
    with one says none."""
    from rooftui.core.point import named_config, point_report

    def protocol(profile: str, batch: int) -> str | None:
        report = point_report(named_config("h100-sxm", "llama-3-70b", profile, tp=4,
                                           batch=batch))
        return report["collectives"]["communication"].get("protocol")

    assert load_profile("h100-sxm-kernels").efficiency.allreduce_ll_share < 1
    assert protocol("h100-sxm-kernels", 1) == "low-latency"
    assert protocol("h100-sxm-kernels", 512) == "bulk"
    assert protocol("h100-trtllm", 512) is None
    text, _ = sweep("point", "--gpu", "h100-sxm", "--model", "llama-3-70b", "--tp", "4",
                    "--batch", "512", "--profile", "h100-sxm-kernels")
    assert "interconnect, bulk protocol" in text
    from rooftui.tui.widgets.breakdown import collective_rows  # the Explorer's table

    report = point_report(named_config("h100-sxm", "llama-3-70b", "h100-sxm-kernels", tp=4,
                                       batch=1))
    assert collective_rows(report)[0][-1] == "interconnect, low-latency protocol"
