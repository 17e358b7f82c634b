"""The model against measurements, in two ways.

Out of sample (`hold_out`, `sweep validate --holdout dataset|engine|gpu`): every dataset
of every file forms one corpus (`build_corpus`); each group (a dataset, or every dataset
of one engine or GPU) is predicted by a fit on the rows of the same kind outside it, and
the held-out residuals give the summaries, the 80 % intervals (`core.intervals`), a
profile's `[interval]` table (`profile_interval`, `write_interval`) and, with `explain`,
each error's parts.

Same-dataset halves (`validate`): every dataset is split in two
(`core.calibration.split_halves`: alternate distinct configurations sorted by size).
Errors are reported on the validation half; the per-dataset fit sees only the
calibration half. A profile given by the user is scored on the validation half too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import (
    Fit,
    error_summary,
    fit,
    predict,
    profile_prediction,
    row_costs,
    split_halves,
)
from rooftui.core.efficiency import COLLECTIVE_PARAMETERS, Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters, machine_fit_parameters
from rooftui.core.intervals import (
    DEFAULT_LEVEL,
    coverage,
    coverage_by_the_others,
    dataset_weights,
    ratio_bounds,
)
from rooftui.sweeps.measured import Conversion, gpu_matches, to_measurements


@dataclass
class DatasetResult:
    name: str
    source: str
    gpu: str
    kinds: list[str]
    calibration_rows: int
    ideal: dict[str, float]
    fitted: dict[str, float]
    fit: Fit
    profile: dict[str, float] | None = None
    notes: list[str] = field(default_factory=list)
    # validation rows, for the chart
    measured_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ideal_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    fitted_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profile_s: np.ndarray | None = None


def validate_dataset(dataset, profile: Assumptions | None = None) -> DatasetResult:
    """Errors of one dataset's validation half (see the module docstring)."""
    gpu_name = dataset.rows[0]["gpu"]
    if any(row["gpu"] != gpu_name for row in dataset.rows):
        raise SpecError(f"dataset {dataset.name!r} mixes GPUs; give each its own dataset")
    gpu = load_gpu(gpu_name)
    rows = to_measurements(dataset.rows)
    ideal_profile = Assumptions()
    costs = row_costs(rows, gpu, ideal_profile)
    calibration = split_halves(rows)
    validation = ~calibration
    if not validation.any():
        raise SpecError(f"dataset {dataset.name!r} has one configuration: nothing to "
                        "validate on")
    held_out = costs.subset(validation)
    fitted = fit(costs.subset(calibration), informed_parameters(rows.subset(calibration)))
    fitted_s = predict(held_out, fitted.efficiency, mbu=fitted.mbu)
    ideal_s = predict(held_out, Efficiency())
    result = DatasetResult(
        name=dataset.name, source=dataset.source, gpu=gpu_name,
        kinds=rows.subset(validation).kinds_present(),
        calibration_rows=int(calibration.sum()),
        ideal=error_summary(ideal_s, held_out.time_s),
        fitted=error_summary(fitted_s, held_out.time_s), fit=fitted,
        notes=list(dataset.notes), measured_s=held_out.time_s, ideal_s=ideal_s,
        fitted_s=fitted_s)
    if profile is not None:
        profile_costs = row_costs(rows.subset(validation), gpu, profile)
        result.profile_s = profile_prediction(profile_costs, profile)
        result.profile = error_summary(result.profile_s, held_out.time_s)
    return result


def validate(conversions: list[Conversion], profile: Assumptions | None = None,
             gpu_filter: str | None = None) -> tuple[list[DatasetResult], list[str]]:
    """Every dataset of every file; returns the results and one line per thing left out."""
    results, skipped = [], []
    wanted = load_gpu(gpu_filter) if gpu_filter else None
    for conversion in conversions:
        skipped.extend(f"{conversion.path.name}: {reason}" for reason in conversion.skipped)
        for dataset in conversion.datasets:
            if wanted and not gpu_matches(dataset.rows[0]["gpu"], gpu_filter, wanted):
                continue
            try:
                results.append(validate_dataset(dataset, profile))
            except SpecError as error:
                skipped.append(f"{dataset.name}: {error}")
    return results, skipped


def results_table(results: list[DatasetResult], profile_name: str | None) -> list[dict]:
    """One JSON-ready row per dataset; errors are fractions (0.05 = 5 %)."""
    table = []
    for result in results:
        row = {"dataset": result.name, "gpu": result.gpu, "kinds": result.kinds,
               "validation_rows": result.ideal["rows"],
               "calibration_rows": result.calibration_rows,
               "ideal": {k: result.ideal[k] for k in ("mape", "worst", "bias")},
               "fitted_on_other_half": {k: result.fitted[k] for k in ("mape", "worst", "bias")},
               "fitted_parameters": {name: _fitted_value(result.fit, name)
                                     for name in result.fit.fitted},
               "source": result.source, "notes": result.notes}
        if result.profile is not None:
            row["profile"] = {"name": profile_name,
                              **{k: result.profile[k] for k in ("mape", "worst", "bias")}}
        table.append(row)
    return table


def _fitted_value(fitted: Fit, name: str) -> float:
    return fitted.mbu if name == "mbu" else getattr(fitted.efficiency, name)


def chart_frame(results: list[DatasetResult]):
    """Long table of validation rows: dataset, kind of prediction, measured and predicted."""
    import polars as pl

    parts = []
    for result in results:
        predictions = {"ideal": result.ideal_s, "fitted on the other half": result.fitted_s}
        if result.profile_s is not None:
            predictions["profile"] = result.profile_s
        for label, predicted in predictions.items():
            parts.append(pl.DataFrame({
                "dataset": [result.name] * len(predicted),
                "prediction": [label] * len(predicted),
                "measured_s": result.measured_s.astype(float),
                "predicted_s": np.asarray(predicted, dtype=float)}))
    return pl.concat(parts) if parts else pl.DataFrame()


MAX_CHART_POINTS_PER_DATASET = 400


def validation_chart(results: list[DatasetResult]):
    """Predicted vs measured time, log-log, one colour per dataset; a dropdown picks the
    prediction (ideal, fitted on the other half, the given profile); the diagonal is a
    perfect prediction. Large datasets are thinned evenly to keep the page light."""
    import altair as alt
    import polars as pl

    frame = chart_frame(results)
    if frame.is_empty():
        raise SpecError("no validated dataset to chart")
    frame = (frame.with_columns(pl.int_range(pl.len()).over("dataset", "prediction")
                                .alias("index"),
                                pl.len().over("dataset", "prediction").alias("count"))
             .filter(pl.col("index") % (pl.col("count") // MAX_CHART_POINTS_PER_DATASET + 1)
                     == 0)
             .with_columns(pl.col("measured_s", "predicted_s").round_sig_figs(4))
             .drop("index", "count"))
    # the measured range, widened: an ideal prediction of a tiny kernel can be 1000x too
    # fast, and is drawn at the edge (clipped) rather than squeezing every other point
    low = float(frame["measured_s"].min()) / 10.0
    high = float(frame["measured_s"].max()) * 3.0
    choices = sorted(frame["prediction"].unique().to_list(), key=lambda c: c != "ideal")
    choice = alt.param(name="prediction_choice", value=choices[-1] if len(choices) > 1
                       else choices[0],
                       bind=alt.binding_select(options=choices, name="prediction "))
    legend = alt.selection_point(fields=["dataset"], bind="legend")
    scale = alt.Scale(type="log", domain=[low, high])
    frame = frame.with_columns(pl.col("predicted_s").clip(low, high).alias("shown_s"))
    points = alt.Chart(frame).mark_circle(size=28).encode(
        x=alt.X("measured_s:Q", scale=scale, title="measured time (s)"),
        y=alt.Y("shown_s:Q", scale=scale, title="predicted time (s)"),
        color=alt.Color("dataset:N", title="dataset", scale=alt.Scale(scheme="tableau20"),
                        legend=alt.Legend(labelLimit=360, symbolLimit=60)),
        opacity=alt.when(legend).then(alt.value(0.8)).otherwise(alt.value(0.05)),
        tooltip=["dataset:N", "prediction:N",
                 alt.Tooltip("measured_s:Q", title="measured (s)", format=".4g"),
                 alt.Tooltip("predicted_s:Q", title="predicted (s)", format=".4g")],
    ).add_params(choice, legend).transform_filter(alt.datum.prediction == choice)
    diagonal = alt.Chart(alt.Data(values=[{"t": low}, {"t": high}])).mark_line(
        color="gray", strokeDash=[4, 4]).encode(x="t:Q", y="t:Q")
    return (diagonal + points).properties(
        width=560, height=420,
        title=alt.TitleParams("Predicted vs measured time, validation halves",
                              subtitle="diagonal: a perfect prediction; below it the model "
                                       "is too fast", anchor="start"))


def write_chart(results: list[DatasetResult], path: Path) -> list[Path]:
    """The validation chart as standalone offline HTML at `path` (.html added if absent)."""
    from rooftui.sweeps.charts import save_chart

    path = Path(path)
    stem = path.with_suffix("") if path.suffix == ".html" else path
    return save_chart(validation_chart(results), stem)



# --- out of sample: leave one group out -------------------------------------------

HOLDOUTS = ("dataset", "engine", "gpu")
# the parameters of each part of a prediction's error (`explain`); what none of them
# explains is the model's shape and the engine's scheduling
PARTS = {
    "kernel efficiency": ("mbu", "gemm_mfu", "gemm_mbu", "gemm_m_half", "attention_mfu",
                          "attention_mfu_half", "attention_mbu", "attention_mbu_half",
                          "attention_kv_head_overhead_s", "attention_query_head_overhead_s",
                          "attention_prompt_head_overhead_s", "activation_quant_bytes"),
    "per-step overhead": ("step_overhead_s", "layer_overhead_s", "kernel_overhead_s",
                          "attention_overhead_s", "prefill_attention_overhead_s",
                          "launch_overhead_s", "host_timer_overhead_s", "host_step_s",
                          "host_sequence_s"),
    "collectives": COLLECTIVE_PARAMETERS,
}
RESIDUAL_PART = "scheduling and model shape"
NO_DATA = "no data to fit on"
# engines of the published datasets without an engine column, by a word of their source
ENGINES = (("systems/data", "TensorRT-LLM 1.3"), ("splitwise", "Splitwise"),
           ("sarathi", "Sarathi-Serve"), ("vidur", "PyTorch (vidur)"),
           ("llmcompass", "PyTorch (LLMCompass)"))
TPOT_ENGINES = {"vllm": "vLLM", "trtllm": "TensorRT-LLM", "sglang": "SGLang"}


def dataset_engine(dataset) -> str:
    """The engine (or kernel library) a dataset was measured with."""
    engine = dataset.rows[0].get("engine")
    if engine:
        return str(engine)
    for word in dataset.name.lower().split():
        if word in TPOT_ENGINES:
            return TPOT_ENGINES[word]
    text = f"{dataset.source} {dataset.name}".lower()
    return next((name for word, name in ENGINES if word in text), "unknown")


@dataclass
class Corpus:
    """Every dataset's rows and costs (ideal counting flags), computed once; a row's
    kind group is the interval kind it belongs to (`core.intervals.KIND_GROUPS`)."""

    rows: object  # Measurements of every dataset, dataset-contiguous
    costs: object  # RowCosts in the same order
    names: list[str]
    gpus: list[str]
    engines: list[str]
    sources: list[str]
    kind_group: np.ndarray
    dtype: np.ndarray  # the row's dtype name


def build_corpus(conversions: list[Conversion], gpu_filter: str | None = None,
                 names: tuple[str, ...] = ()) -> tuple[Corpus, list[str]]:
    """The datasets of every file (measured on `gpu_filter`, named with one of `names`
    when given: case-insensitive parts) as one corpus; returns it and what was left out."""
    from rooftui.core.calibration import KINDS
    from rooftui.core.intervals import KIND_GROUPS
    from rooftui.core.tables import DTYPES

    wanted = load_gpu(gpu_filter) if gpu_filter else None
    chosen, skipped = [], []
    for conversion in conversions:
        skipped.extend(f"{conversion.path.name}: {reason}" for reason in conversion.skipped)
        for dataset in conversion.datasets:
            gpu_name = dataset.rows[0]["gpu"]
            if wanted and not gpu_matches(gpu_name, gpu_filter, wanted):
                continue
            if names and not any(part.lower() in dataset.name.lower() for part in names):
                continue
            if any(row["gpu"] != gpu_name for row in dataset.rows):
                skipped.append(f"{dataset.name}: mixes GPUs; give each its own dataset")
                continue
            chosen.append(dataset)
    if not chosen:
        raise SpecError("no dataset matches" + (f" --gpu {gpu_filter}" if gpu_filter else "")
                        + (f" --dataset {', '.join(names)}" if names else ""))
    names = [d.name for d in chosen]
    rows = to_measurements([row for d in chosen for row in d.rows], names)
    kept, parts = [], []
    for index, dataset in enumerate(chosen):
        members = rows.dataset == index
        try:
            parts.append(row_costs(rows.subset(members), load_gpu(dataset.rows[0]["gpu"]),
                                   Assumptions()))
            kept.append(index)
        except SpecError as error:
            skipped.append(f"{dataset.name}: {error}")
    if not kept:
        raise SpecError("no dataset could be validated"
                        + (f" ({'; '.join(skipped)})" if skipped else ""))
    rows = rows.subset(np.isin(rows.dataset, kept))
    costs = _concatenate(parts)
    kinds = np.array([KIND_GROUPS.get(kind, kind) for kind in KINDS])
    return Corpus(rows=rows, costs=costs, names=names,
                  gpus=[d.rows[0]["gpu"] for d in chosen],
                  engines=[dataset_engine(d) for d in chosen],
                  sources=[d.source for d in chosen], kind_group=kinds[rows.kind],
                  dtype=np.array(DTYPES)[rows.dtype]), skipped


def _concatenate(parts: list):
    first = parts[0]
    return type(first)(**{name: np.concatenate([getattr(p, name) for p in parts])
                          for name in vars(first)})


def group_keys(corpus: Corpus, holdout: str) -> list[str]:
    """Each dataset's group under `holdout` (dataset, engine or gpu)."""
    return {"dataset": corpus.names, "engine": corpus.engines, "gpu": corpus.gpus}[holdout]


@dataclass
class HeldOut:
    """One held-out group: its rows' predictions by a fit that never saw them."""

    group: str
    datasets: list[int]
    rows: np.ndarray  # indices into the corpus
    predicted_s: np.ndarray
    notes: list[str]
    explained: dict[str, float] | None = None  # part -> mean log error it accounts for


def hold_out(corpus: Corpus, holdout: str, explain: bool = False) -> list[HeldOut]:
    """For each group, per kind group of its rows: fit on every row of that kind group
    outside the group, predict the group's rows (steps with each machine's own fixed
    times, `_fits_per_machine`). A kind with nothing outside the group is
    predicted by the transfer rule (`core.assumptions.calibrated_profile`) when that
    profile was fitted on none of the group's data, else by the ideal roofline."""
    keys = group_keys(corpus, holdout)
    dataset_group = np.array(keys)[corpus.rows.dataset]
    results = []
    for group in dict.fromkeys(keys[d] for d in np.unique(corpus.rows.dataset)):
        inside = dataset_group == group
        predicted = np.full(len(corpus.rows), np.nan)
        notes, shares = [], {}
        for kind in dict.fromkeys(corpus.kind_group[inside]):
            target = inside & (corpus.kind_group == kind)
            train = ~inside & (corpus.kind_group == kind)
            if train.any():
                fitting = _libraries_pooled(corpus, train, target)
                fits = (_fits_per_machine(fitting, train, target, notes) if kind == "step"
                        else [(target, _fit(fitting, train))])
                for rows, fitted in fits:
                    predicted[rows] = predict(fitting.costs.subset(rows), fitted.efficiency,
                                              mbu=fitted.mbu)
                    if explain:
                        _add(shares, _explain(fitting, rows, fitted), rows.sum())
            else:
                predicted[target], note = _transferred(corpus, target)
                notes.append(f"{kind}: {NO_DATA}; {note}")
        members = np.flatnonzero(inside)
        results.append(HeldOut(
            group=group, datasets=[int(d) for d in np.unique(corpus.rows.dataset[inside])],
            rows=members, predicted_s=predicted[members], notes=notes,
            explained={p: v / len(members) for p, v in shares.items()} if explain else None))
    return results


def _libraries_pooled(corpus: Corpus, train: np.ndarray, target: np.ndarray) -> Corpus:
    """The corpus, or where a held-out collective library has no rows to fit its own table
    on (`--holdout engine` with one library's all-reduces), every all-reduce as the base
    values': those are then fitted on every other library's rows, not only on the rows
    that name none."""
    libraries = corpus.rows.library
    named = set(np.unique(libraries[target])) - {0}
    if named <= set(np.unique(libraries[train])):
        return corpus
    none = np.zeros_like(libraries)
    return replace(corpus, rows=replace(corpus.rows, library=none),
                   costs=replace(corpus.costs, library=none))


def _fit(corpus: Corpus, mask: np.ndarray) -> Fit:
    return fit(corpus.costs.subset(mask), informed_parameters(corpus.rows.subset(mask)))


def machine_labels(corpus: Corpus) -> np.ndarray:
    """Each row's machine: its dataset's GPU and engine (whose host sets its fixed times)."""
    return np.array([f"{gpu} under {engine}" for gpu, engine in
                     zip(corpus.gpus, corpus.engines, strict=True)])[corpus.rows.dataset]


def _fits_per_machine(corpus: Corpus, train: np.ndarray, target: np.ndarray,
                      notes: list[str]) -> list[tuple[np.ndarray, Fit]]:
    """Step fits whose fixed times are each machine's own (`machine_fit_parameters`):
    each of the target's machines with steps in the training rows is predicted with its
    own, the others by a fit pooled over every machine (a note names them). A machine
    whose training steps have no all-reduce (TP 1) while its target's have is pooled too:
    its own fit would price their all-reduces at no fixed time."""
    labels = machine_labels(corpus)
    split = corpus.rows.tp > 1
    machines = list(dict.fromkeys(labels[target]))
    untrained = {machine: "no other step" for machine in machines
                 if not (train & (labels == machine)).any()}
    untrained.update({machine: "no other step with all-reduces" for machine in machines
                      if machine not in untrained
                      and (target & split & (labels == machine)).any()
                      and not (train & split & (labels == machine)).any()})
    fits, own_machines = [], [machine for machine in machines if machine not in untrained]
    if own_machines:
        shared, owners = machine_fit_parameters(corpus.rows.subset(train), labels[train])
        fitted = fit(corpus.costs.subset(train), shared, machines=owners)
        for machine in own_machines:
            own = fitted.machine_efficiencies[owners.names.index(machine)]
            fits.append((target & (labels == machine), replace(fitted, efficiency=own)))
    if untrained:
        reasons = "; ".join(f"{reason} of {machine}" for machine, reason in untrained.items())
        notes.append(f"step: {reasons}; fixed times pooled over the other machines")
        fits.append((target & np.isin(labels, list(untrained)), _fit(corpus, train)))
    return fits


def _transferred(corpus: Corpus, target: np.ndarray) -> tuple[np.ndarray, str]:
    from rooftui.core.assumptions import calibrated_profile, nearest_measured_gpu

    gpu_names = sorted({corpus.gpus[d] for d in np.unique(corpus.rows.dataset[target])})
    gpu = load_gpu(gpu_names[0])
    source, _ = nearest_measured_gpu(gpu)
    if any(gpu_matches(name, source, load_gpu(source)) for name in gpu_names):
        # the GPU's own kernel profile was fitted on this group's data
        return predict(corpus.costs.subset(target), Efficiency()), "the ideal roofline"
    profile = calibrated_profile(gpu)
    return profile_prediction(corpus.costs.subset(target), profile), f"{profile.name}"


def _add(total: dict, shares: dict, count: int) -> None:
    for part, value in shares.items():
        total[part] = total.get(part, 0.0) + value * count


def _explain(corpus: Corpus, target: np.ndarray, held_out: Fit) -> dict[str, float]:
    """The held-out fit's mean absolute log error on `target`, split by Shapley values
    over the parts of `PARTS`: each part's parameters switched from the held-out fit to
    a fit on the target itself (the best the model's form allows), in every order; the
    in-target fit's own error is what no parameter explains (`RESIDUAL_PART`)."""
    from itertools import combinations

    costs = corpus.costs.subset(target)
    own = _fit(corpus, target)
    log_measured = np.log(costs.time_s)

    def error(switched: frozenset) -> float:
        values = {"mbu": held_out.mbu, **held_out.efficiency.as_dict()}
        replaced = {"mbu": own.mbu, **own.efficiency.as_dict()}
        for part in switched:  # a dtype's own value (fp8.gemm_mfu) goes with its base
            values.update({name: value for name, value in replaced.items()
                           if name.rpartition(".")[2] in PARTS[part]})
        mbu = values.pop("mbu")
        predicted = predict(costs, Efficiency().with_values(values), mbu=mbu)
        return float(np.mean(np.abs(np.log(predicted) - log_measured)))

    parts = list(PARTS)
    values = {frozenset(s): error(frozenset(s)) for r in range(len(parts) + 1)
              for s in combinations(parts, r)}
    shares = {}
    n = len(parts)
    for part in parts:
        total = 0.0
        for subset, value in values.items():
            if part in subset:
                continue
            weight = (math.factorial(len(subset)) * math.factorial(n - len(subset) - 1)
                      / math.factorial(n))
            total += weight * (value - values[subset | {part}])
        shares[part] = total
    shares[RESIDUAL_PART] = values[frozenset(parts)]
    return shares


def residuals(corpus: Corpus, results: list[HeldOut]) -> tuple[np.ndarray, np.ndarray]:
    """Every held-out row's log(measured / predicted), and the rows (corpus indices)."""
    rows = np.concatenate([r.rows for r in results])
    predicted = np.concatenate([r.predicted_s for r in results])
    return np.log(corpus.costs.time_s[rows] / predicted), rows


def nested_coverage(log_ratios: np.ndarray, datasets: np.ndarray,
                    level: float = DEFAULT_LEVEL) -> float:
    """The share of each dataset's residuals inside the interval made from the other
    datasets' residuals, averaged over datasets: the interval's coverage on data it was
    not made from. NaN with one dataset."""
    shares = coverage_by_the_others(log_ratios, datasets, level)
    return float(np.mean(list(shares.values()))) if shares else math.nan


def holdout_summary(corpus: Corpus, results: list[HeldOut]) -> dict[str, dict[str, dict]]:
    """Errors of the held-out predictions by kind, step phase (decode, prefill or mixed),
    GPU, engine and dtype: MAPE, worst and bias with each dataset weighted equally; per
    kind and phase also the 80 % interval and its coverage on held-out datasets
    (`nested_coverage`). {summary: {value: figures}}, e.g. {"kind": {"gemm": {...}}}."""
    log_ratios, rows = residuals(corpus, results)
    relative = np.exp(-log_ratios) - 1.0  # predicted / measured - 1
    datasets = corpus.rows.dataset[rows]
    kinds = corpus.kind_group[rows]
    batch, prefill = corpus.rows.batch[rows], corpus.rows.prefill[rows]
    phase = np.where(batch == 0, "prefill step", np.where(prefill == 0, "decode step",
                                                           "mixed step"))
    labels = {"kind": kinds,
              "step phase": np.where(kinds == "step", phase, ""),
              "gpu": np.array(corpus.gpus)[datasets],
              "engine": np.array(corpus.engines)[datasets],
              "dtype": corpus.dtype[rows]}
    summary = {}
    for by, values in labels.items():
        lines = {}
        for value in dict.fromkeys(values):
            if not value:  # a row outside this summary (kernels have no step phase)
                continue
            members = values == value
            weights = dataset_weights(datasets[members])
            error = relative[members]
            line = {"datasets": len(np.unique(datasets[members])),
                    "rows": int(members.sum()),
                    "mape": float(np.sum(weights * np.abs(error)) / weights.sum()),
                    "worst": float(error[np.argmax(np.abs(error))]),
                    "bias": float(np.sum(weights * error) / weights.sum())}
            if by in ("kind", "step phase"):
                line["interval"] = list(ratio_bounds(log_ratios[members], weights))
                line["coverage"] = nested_coverage(log_ratios[members], datasets[members])
            lines[str(value)] = line
        summary[by] = lines
    return summary


def holdout_table(corpus: Corpus, results: list[HeldOut]) -> list[dict]:
    """One JSON-ready row per held-out group: errors as fractions, notes, and the
    explained parts when asked."""
    table = []
    for result in results:
        measured = corpus.costs.time_s[result.rows]
        errors = error_summary(result.predicted_s, measured)
        row = {"group": result.group,
               "datasets": [corpus.names[d] for d in result.datasets],
               "kinds": list(dict.fromkeys(corpus.kind_group[result.rows])),
               "rows": errors["rows"],
               **{k: errors[k] for k in ("mape", "worst", "bias")},
               "notes": result.notes}
        if result.explained is not None:
            row["explained"] = result.explained
        table.append(row)
    return table


def profile_scores(corpus: Corpus, results: list[HeldOut], profile: Assumptions
                   ) -> list[dict]:
    """A given profile on each held-out group's rows: its errors and, when it has an
    interval, the share of rows inside it and the widening it would need
    (`core.intervals.widening_factor`) — for a transferred profile, the measured check
    of its widening."""
    from rooftui.core.intervals import widening_factor

    scores = []
    for result in results:
        gpu = load_gpu(corpus.gpus[result.datasets[0]])
        predicted = profile_prediction(_costs_under(corpus, result.rows, gpu, profile),
                                       profile)
        measured = corpus.costs.time_s[result.rows]
        score = {"group": result.group,
                 **{k: v for k, v in error_summary(predicted, measured).items()
                    if k != "rows"}}
        if profile.interval is not None:
            kinds = corpus.kind_group[result.rows]
            log_ratios = np.log(measured / predicted)
            for kind in dict.fromkeys(kinds):
                bounds = profile.interval.bounds(kind)
                if bounds is None:
                    continue
                members = kinds == kind
                weights = dataset_weights(corpus.rows.dataset[result.rows][members])
                score.setdefault("interval", {})[kind] = {
                    "coverage": coverage(log_ratios[members], bounds, weights),
                    "widening_needed": widening_factor(log_ratios[members], bounds,
                                                       weights, profile.interval.level)}
        scores.append(score)
    return scores


def _costs_under(corpus: Corpus, rows: np.ndarray, gpu, profile: Assumptions):
    """The rows' costs with the profile's counting flags (the corpus has the ideal's)."""
    if profile.attention_flops == "causal" and profile.kv_write and not (
            profile.activation_traffic):
        return corpus.costs.subset(rows)
    mask = np.zeros(len(corpus.rows), dtype=bool)
    mask[rows] = True
    return row_costs(corpus.rows.subset(mask), gpu, profile)


def profile_interval(corpus: Corpus, results: list[HeldOut], document: dict,
                     profile: Assumptions, held_out: str) -> dict:
    """The `[interval]` table of a profile fitted on the datasets its `[sources]` names,
    on the GPU its `[calibration]` names, from leave-one-dataset-out `results`:

    - each kind it was fitted on: the held-out residuals of the datasets it was fitted on
      (each predicted by a fit on every other dataset of the kind);
    - `step` when it was fitted on no steps (a kernel profile): its own residuals on the
      step datasets of its GPU, which it never saw (or, with none there, on every other
      GPU's, the profile transferred to them).
    """
    gpu_name = document.get("calibration", {}).get("gpu")
    if not gpu_name:
        raise SpecError("the profile has no [calibration] gpu: only a fitted profile gets "
                        "an interval")
    gpu = load_gpu(gpu_name)
    sources = set(document.get("sources", {}))
    fitted_on = np.array([name in sources or f"aiconfigurator {name}" in sources
                          for name in corpus.names])
    own_gpu = np.array([gpu_matches(name, gpu_name, gpu) for name in corpus.gpus])
    log_ratios, rows = residuals(corpus, results)
    datasets = corpus.rows.dataset[rows]
    kinds = corpus.kind_group[rows]
    table, described = {"level": DEFAULT_LEVEL}, []
    for kind in dict.fromkeys(kinds[fitted_on[datasets]]):
        members = fitted_on[datasets] & (kinds == kind)
        table[kind] = _bounds(log_ratios[members], datasets[members])
        described.append(f"{kind} from {len(np.unique(datasets[members]))} held-out datasets")
    steps = own_gpu[datasets] & (kinds == "step")
    where = "its GPU"
    if not steps.any():  # no step data on its GPU: the profile transferred to others'
        steps, where = kinds == "step", "other GPUs (transferred there)"
    if "step" not in table and steps.any():
        predicted = np.concatenate([
            profile_prediction(_costs_under(corpus, rows[steps & (datasets == d)],
                                            load_gpu(corpus.gpus[d]), profile), profile)
            for d in dict.fromkeys(datasets[steps])])
        order = np.concatenate([np.flatnonzero(steps & (datasets == d))
                                for d in dict.fromkeys(datasets[steps])])
        table["step"] = _bounds(np.log(corpus.costs.time_s[rows[order]] / predicted),
                                datasets[order])
        described.append(f"step from {len(np.unique(datasets[steps]))} step datasets on "
                         f"{where}, never fitted on")
    table["held_out"] = f"{held_out}; on {gpu.name}: " + ", ".join(described)
    return table


def _bounds(log_ratios: np.ndarray, datasets: np.ndarray) -> list[float]:
    return [round(b, 3) for b in ratio_bounds(log_ratios, dataset_weights(datasets))]


def write_interval(path: Path, table: dict, command: str) -> None:
    """Replace the profile's `[interval]` table (and the line saying how it was made)
    atomically, after checking that the result loads; kinds the new table lacks (an
    engine profile's end-to-end ttft and tpot) keep their old bounds."""
    import tomllib

    from rooftui.core.assumptions import assumptions_from_dict
    from rooftui.core.intervals import INTERVAL_KINDS
    from rooftui.sweeps.output_files import write_text_atomic

    text = Path(path).read_text(encoding="utf-8")
    old = tomllib.loads(text).get("interval", {})
    table = {**table, **{k: v for k, v in old.items()
                         if k not in table and (k in INTERVAL_KINDS or k == "transferred_from")}}
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("# Interval by:"):
            continue
        if line.startswith("["):
            skipping = line.strip() == "[interval]"
        if not skipping:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    kept.insert(1 if kept and kept[0].startswith("# Calibrated by:") else 0,
                f"# Interval by: {command}")
    kept += ["", "[interval]", f"level = {table['level']}",
             "# multiplicative bounds: low = prediction * low_ratio, high = prediction * "
             "high_ratio"]
    kept += [f"{kind} = [{table[kind][0]}, {table[kind][1]}]" for kind in INTERVAL_KINDS
             if kind in table]
    kept += [f"{key} = {json.dumps(table[key], ensure_ascii=False)}"
             for key in ("held_out", "transferred_from") if key in table]
    text = "\n".join(kept) + "\n"
    try:
        assumptions_from_dict(tomllib.loads(text), str(path), Path(path).stem)
    except (SpecError, tomllib.TOMLDecodeError) as error:
        raise SpecError(f"--write-interval: {error}") from None
    write_text_atomic(path, text)
