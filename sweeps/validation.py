"""The model against measurements: error per dataset for the ideal roofline, a given
profile, and a profile fitted on the other half of the same dataset.

Every dataset is split in two (`core.calibration.split_halves`: alternate distinct
configurations sorted by size). Errors are always reported on the validation half; the
per-dataset fit sees only the calibration half, so no reported point was fitted. A
profile given by the user is scored on the validation half too: a shipped calibrated
profile was fitted on calibration halves only (its `[calibration]` table says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import (
    Fit,
    error_summary,
    fit,
    informed_parameters,
    predict,
    profile_prediction,
    row_costs,
    split_halves,
)
from rooftui.core.efficiency import Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
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

