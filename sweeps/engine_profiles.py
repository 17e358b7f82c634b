"""Engine profiles from end-to-end runs: an engine's overheads fitted on top of a kernel
profile by replaying runs (`fit_engine_profile`), and the profile's TOML written so that
`--profile` loads it back (`engine_profile_text`, `write_engine_profile`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rooftui.core.assumptions import Assumptions
from rooftui.core.efficiency import Efficiency, has_host_floor
from rooftui.core.errors import SpecError
from rooftui.sweeps.bench_results import Run
from rooftui.sweeps.compute_share import Shares
from rooftui.sweeps.end_to_end import (
    OVERHEADS,
    HostFloor,
    Scheduling,
    Target,
    engine_defaults,
    mape,
    replay_again,
    replay_runs,
    with_overheads,
)


def floor_edges(floor: HostFloor, floors: Sequence[HostFloor]) -> list[str]:
    """The host floor's parameters at the largest value of the grid `floors` it was
    chosen from: the runs' own may lie beyond (flagged as at a bound)."""
    if floor is None or len(floors) < 2:
        return []
    return [name for index, name in enumerate(("host_step_s", "host_sequence_s"))
            if floor[index] > 0 and floor[index] == max(f[index] for f in floors if f)]


def fit_engine_profile(runs: Sequence[Run], base: Assumptions, targets: Sequence[Target],
                       scheduling: Scheduling | None = None):
    """Fit an engine's overheads on top of `base` from `runs` (one short benchmark is
    enough for the per-step term), and for an engine with an overlapping scheduler its
    host floor too (the candidate of least loss, `EngineDefaults.host_floors`, in place of
    any floor `base` has; another engine keeps `base`'s). Returns (the fitted Efficiency,
    a summary: the floor in effect, fitted parameters, those at a bound, in-sample MAPE of
    mean TTFT and TPOT, the replays)."""
    engines = {target.engine for target in targets}
    floors = engine_defaults(engines.pop()).host_floors if len(engines) == 1 else (None,)
    replays = replay_runs(runs, targets, base, scheduling or Scheduling())
    chosen = Shares(replays, base, replay_again, shares=(1.0,), host_floors=floors).fit()
    fit, held = chosen.fit, chosen.assumptions.efficiency
    fitted = with_overheads(chosen.assumptions, fit.overheads)
    return fitted.efficiency, {
        "host_floor_s": ([held.host_step_s, held.host_sequence_s]
                         if has_host_floor(held) else None),
        "overheads_s": dict(zip(OVERHEADS, map(float, fit.overheads), strict=True)),
        "fitted": fit.fitted,
        "at_bound": fit.at_bound + floor_edges(chosen.host_floor, floors),
        "rounds": fit.rounds,
        "runs": len(runs), "mape_ttft": mape(fit.replays, "ttft"),
        "mape_tpot": mape(fit.replays, "tpot"), "replays": fit.replays}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def engine_profile_text(base: Assumptions, efficiency: Efficiency, *, command: str,
                        description: str, calibration: dict,
                        interval: dict | None = None, sources: dict | None = None) -> str:
    """An engine profile's TOML: the base (kernel) profile's settings and efficiencies
    with the fitted overheads, `[calibration]`, `[interval]` (`interval`: level,
    ttft/tpot (low, high), held_out) and `[sources]`; the command on the first line."""
    lines = [f"# Fitted by: {command}",
             "# An engine profile: the kernel profile named in [calibration] plus the "
             "engine's overheads, fitted by replaying end-to-end runs through the simulator.",
             f"description = {_toml(description)}",
             *(f"{key} = {_toml(getattr(base, key))}" for key in (
                 "mfu", "mbu", "overlap", "attention_flops", "activation_traffic", "kv_write",
                 "memory_reserve_gb")),
             "", "[efficiency]",
             *(f"{name} = {value:.4g}" for name, value in efficiency.as_dict().items()),
             "", "[calibration]", f"command = {_toml(command)}",
             *(f"{key} = {_toml(value)}" for key, value in calibration.items())]
    if interval is not None:
        lines += ["", "[interval]", f"level = {interval['level']!r}"]
        lines += [f"{kind} = [{low!r}, {high!r}]   # multiplicative bounds: low = "
                  "prediction * low_ratio" for kind, (low, high) in interval["ratios"].items()]
        lines.append(f"held_out = {_toml(interval['held_out'])}")
    if sources:
        lines += ["", "[sources]", *(f"{_toml(k)} = {_toml(v)}" for k, v in sources.items())]
    return "\n".join(lines) + "\n"


def write_engine_profile(path: Path, text: str) -> Path:
    """Write atomically, after checking that the profile loads back as --profile reads it."""
    from rooftui.core.assumptions import load_profile
    from rooftui.sweeps.output_files import atomic_path

    path = Path(path)
    if path.suffix != ".toml":
        raise SpecError(f"--out: {path} must end in .toml (a profile file)")
    try:
        with atomic_path(path) as temporary:
            temporary.write_text(text, encoding="utf-8")
            load_profile(str(temporary.resolve()))
    except SpecError as error:
        raise SpecError(f"--out: {error}") from None
    return path
