"""`sweep replay`: predict measured serving benchmarks by simulating them, and fit an
engine profile from them (sweeps/end_to_end.py replays, sweeps/end_to_end_data.py reads the
published runs, sweeps/engine_profiles.py fits and writes a profile)."""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path

import click

from rooftui.core import units
from rooftui.core.errors import SpecError
from rooftui.sweeps.cli.options import DTYPE, JSON_NULLS, Number, json_text

FORMATS = ("vllm", "sglang", "guidellm", "genai-perf", "aiperf")  # bench_results.FORMATS
ENGINE_NAMES = ("vllm", "sglang", "trtllm")  # end_to_end.ENGINES
# --clients as `Scheduling.stagger` (end_to_end.CLIENT_STARTS, inverted)
CLIENTS = {"staggered": True, "in-step": False}
MEASURED_ENGINES = (*ENGINE_NAMES, "splitwise")
LEVEL = 0.8


@click.command("replay")
@click.argument("result_files", nargs=-1, metavar="RESULT_FILE...")
@click.option("--model", metavar="NAME|PATH",
              help="Model the runs served: shipped name, model TOML or config.json "
                   "(required with RESULT_FILE).")
@click.option("--gpu", metavar="NAME|PATH", help="GPU of each replica (required with "
                                                  "RESULT_FILE).")
@click.option("--tp", type=Number("tp"), default=1, show_default=True, metavar="N",
              help="Tensor parallelism of each replica.")
@click.option("--weight-dtype", type=DTYPE, help="Weight format [default: the model's].")
@click.option("--kv-dtype", type=DTYPE, help="KV-cache format [default: bf16].")
@click.option("--engine", type=click.Choice(MEASURED_ENGINES),
              help="Engine whose scheduler defaults apply [default: the file's, else vllm]; "
                   "with --measured-dir, replay only its runs.")
@click.option("--profile", metavar="NAME|PATH",
              help="Profile to predict with, and the kernel profile --fit adds overheads to "
                   "[default: the engine's kernel profile: h100-trtllm-fp8 for trtllm (its "
                   "own fp8 GEMM and fp8-KV attention timings), h100-trtllm for the others].")
@click.option("--format", "file_format", type=click.Choice(FORMATS),
              help="Result file format [default: detected from the content].")
@click.option("--policy", type=click.Choice(["chunked", "continuous", "prefill_first",
                                            "static"]),
              help="Batching policy simulated (`sweep simulate --help`) [default: the "
                   "engine's: chunked for vllm, prefill_first for sglang, continuous for "
                   "trtllm].")
@click.option("--max-batch", type=Number("max_batch"), metavar="N",
              help="Sequences in flight at most [default: the engine's: vllm/sglang 1024, "
                   "trtllm 2048].")
@click.option("--token-budget", type=Number("token_budget"), metavar="TOKENS",
              help="Tokens per step [default: the engine's, 8192].")
@click.option("--clients", type=click.Choice(list(CLIENTS)),
              help="How a closed loop's C clients start: staggered (their first requests "
                   "at random times over one request's cycle) or in-step (all at once, as "
                   "AIPerf starts its profiling phase once every warm-up response is in); "
                   "either way each client re-sends on completion, and request-rate runs "
                   "and static batches are unaffected [default: the engine's, in-step for "
                   "sglang and staggered for the others; docs/end-to-end.md].")
@click.option("--prompt-pool", type=Number("prompt_pool"), metavar="N",
              help="Distinct prompts the client drew every request's prompt from, at "
                   "random: a repeat finds its whole prompt in the engine's prefix cache "
                   "(LRU in the KV memory the running batch leaves free; all three engines "
                   "cache prefixes by default). genai-perf's and AIPerf's synthetic "
                   "datasets hold 100 (--num-dataset-entries), read from their files; 0: "
                   "every prompt its own [default: the file's; none for vLLM, SGLang and "
                   "GuideLLM files and the published runs].")
@click.option("--measured-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Replay the published end-to-end datasets in DIR (MEASURED_DIR: the "
                   "ai-dynamo/aiconfigurator silicon runs and Mutinifni/splitwise-sim's "
                   "static batches) instead of RESULT_FILEs.")
@click.option("--fit", is_flag=True,
              help="Fit the engine's per-step/per-layer/per-all-reduce overheads and its "
                   "per-request front end (request_overhead_s) on top of --profile; for "
                   "sglang its overlap scheduler's host floor instead (host_step_s, "
                   "host_sequence_s: the least a step takes, chosen from a grid) and its "
                   "front end. With --measured-dir: leave-one-group-out per engine; for "
                   "trtllm also its compute share (the profile's mfu at 1, 0.8, 0.65 or 0.5 "
                   "of the kernel data's rate: sustained prefills in serving), chosen with "
                   "them per fold.")
@click.option("--out", type=click.Path(dir_okay=True), metavar="PATH",
              help="--fit: the profile TOML to write; with --measured-dir a folder, "
                   "receiving <gpu>-<engine>.toml for each GPU and engine with data.")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
def replay(result_files, model, gpu, tp, weight_dtype, kv_dtype, engine, profile, file_format,
           policy, max_batch, token_budget, clients, prompt_pool, measured_dir, fit, out,
           as_json):
    """Predict benchmark runs by simulating them; compare TTFT, TPOT, ITL and throughput.

    Reads the result files of `vllm bench serve --save-result`, SGLang's `bench_serving
    --output-file`, GuideLLM's report JSON and genai-perf / AIPerf profile exports, and
    replays each run through the simulator with its own requests, lengths and arrivals
    (a client concurrency C is a closed loop of C slots started out of step, in step for
    SGLang, after the warm-up requests the file records, which are not scored; a request
    rate is a Poisson process) and the engine's scheduler defaults. The profile's
    request_overhead_s (a front end: HTTP, tokenisation, streaming) is added to each TTFT
    and E2E. genai-perf and AIPerf draw every prompt from a synthetic dataset (100 prompts
    unless the file says otherwise), so repeats hit the engine's prefix cache, which the
    replay simulates (--prompt-pool). Errors are predicted / measured - 1. --fit re-fits an
    engine's overheads to your own engine version from one short benchmark. Result files
    do not record the GPU or TP (hence --gpu, --tp); `vllm bench serve --metadata
    engine_version=0.12.0` adds the engine's version to a vLLM file.

    \b
    Examples:
      sweep replay result.json --model llama-3.1-8b --gpu h100-sxm
      sweep replay runs.jsonl --model llama-3-70b --gpu h200 --tp 4 --weight-dtype fp8
      sweep replay result.json --model llama-3.1-8b --gpu h100-sxm --fit --out mine.toml
      sweep replay --measured-dir MEASURED_DIR --fit --out specs/profiles/
    """
    if out and not fit:
        raise click.UsageError("--out writes what --fit makes: add --fit")
    if measured_dir:
        if result_files:
            raise click.UsageError("give RESULT_FILEs or --measured-dir, not both")
        for name, given in (("--clients", clients), ("--prompt-pool", prompt_pool)):
            if given is not None and out:
                raise click.UsageError(f"{name} with --measured-dir replays the published "
                                       "runs another way than the shipped profiles are "
                                       f"fitted: drop --out (or {name})")
        report = _measured(Path(measured_dir), engine, profile, fit, out, clients,
                           prompt_pool)
    else:
        if not result_files:
            raise click.UsageError("give at least one RESULT_FILE (or --measured-dir DIR)")
        if not model or not gpu:
            raise click.UsageError("--model and --gpu are needed: result files do not "
                                   "say what hardware the runs were served on")
        target = {"model": model, "gpu": gpu, "tp": int(tp), "weight_dtype": weight_dtype,
                  "kv_dtype": kv_dtype}
        report = _files(result_files, file_format, target, engine, policy, max_batch,
                        token_budget, clients, prompt_pool, fit, out, profile)
    click.echo(json_text(report, NULL_REASONS) if as_json else render(report))


NULL_REASONS = {
    "errors": "the file has no measured mean of that metric",
}


def _command() -> str:
    return "sweep replay " + " ".join(shlex.quote(a) for a in sys.argv[2:])


def _row(replay) -> dict:
    return {**replay.run.summary(), "target": vars(replay.target).copy(),
            "clients": replay.clients, "predicted": replay.predicted,
            "errors": replay.errors()}


def _files(paths, file_format, target, engine, policy, max_batch, token_budget, clients,
           prompt_pool, fit, out, profile) -> dict:
    from rooftui.core.assumptions import load_profile
    from rooftui.sweeps import end_to_end, engine_profiles
    from rooftui.sweeps.bench_results import read_benchmark

    runs = [run for path in paths for run in read_benchmark(path, file_format)]
    engines = {engine or run.engine for run in runs}
    targets = [end_to_end.Target(**target, engine=engine or (
        run.engine if run.engine in ENGINE_NAMES else None)) for run in runs]
    if profile is None:
        kernels = sorted({end_to_end.kernel_profile(t.engine) for t in targets})
        if len(kernels) > 1:
            raise SpecError(f"these files hold runs of engines with different kernel "
                            f"profiles ({', '.join(kernels)}): give --profile or --engine")
        profile = kernels[0]
    base = load_profile(profile)
    scheduling = end_to_end.Scheduling(policy=policy, max_batch=max_batch,
                                       token_budget=token_budget, stagger=CLIENTS.get(clients),
                                       prompt_pool=prompt_pool)
    replays = end_to_end.replay_runs(runs, targets, base, scheduling)
    # the start --clients chose, where some run is a closed loop it applies to
    started = clients if any(r.clients for r in replays) else None
    report = {"profile": base.name, "runs": [_row(r) for r in replays]}
    if fit:
        efficiency, summary = engine_profiles.fit_engine_profile(runs, base, targets, scheduling)
        report["fit"] = {key: value for key, value in summary.items() if key != "replays"}
        report["fit"]["runs_after"] = [_row(r) for r in summary["replays"]]
        if out:
            label = "/".join(sorted(e for e in engines if e)) or "engine"
            text = engine_profiles.engine_profile_text(
                base, efficiency, command=_command(),
                description=f"{label} overheads fitted end to end on {len(runs)} run(s) of "
                            f"{target['model']} on {target['gpu']} (TP {target['tp']}), on "
                            f"top of {profile}"
                            + (f", clients replayed {started}" if started else "")
                            + (f", steps no shorter than the host's "
                               f"{_floor_text(summary['host_floor_s'])}"
                               if _floor_text(summary["host_floor_s"]) else ""),
                calibration={"gpu": target["gpu"], "kind": "end_to_end", "base": profile,
                             "rows": len(runs),
                             **({"host_floor_s": summary["host_floor_s"]}
                                if summary["host_floor_s"] is not None else {}),
                             **({"clients": started} if started else {}),
                             "fitted": summary["fitted"],
                             "at_bound": summary["at_bound"]})
            report["fit"]["wrote"] = str(engine_profiles.write_engine_profile(Path(out), text))
    return report


def _measured(folder, engine, profile, fit, out, clients, prompt_pool) -> dict:
    from dataclasses import replace

    from rooftui.core.assumptions import load_profile
    from rooftui.sweeps import compute_share, end_to_end, end_to_end_data, engine_profiles

    runs, targets, scheduling, notes = end_to_end_data.measured_runs(folder, engine)
    if clients:
        scheduling = [replace(s, stagger=CLIENTS[clients]) for s in scheduling]
        notes = [*notes, f"closed loops replayed {clients} (--clients), not each engine's way"]
    if prompt_pool is not None:
        scheduling = [replace(s, prompt_pool=prompt_pool) for s in scheduling]
        notes = [*notes, f"prompts drawn from a pool of {prompt_pool} and hit in the engines' "
                         "prefix caches (--prompt-pool)" if prompt_pool else
                         "every prompt its own (--prompt-pool 0)"]
    engines = sorted({t.engine for t in targets})
    kernels = {e: profile or end_to_end.kernel_profile(e) for e in engines}
    bases = {name: load_profile(name) for name in set(kernels.values())}
    click.echo(f"replaying {len(runs)} runs ...", err=True)
    replays = [end_to_end.replay_run(run, target, bases[kernels[target.engine]], settings)
               for run, target, settings in zip(runs, targets, scheduling, strict=True)]
    report = {"profile": ", ".join(
                  f"{bases[name].name} ({', '.join(e for e in engines if kernels[e] == name)})"
                  for name in sorted(bases)),
              "kernel_profiles": kernels, "notes": notes, "runs": len(runs),
              "groups": _group_rows(replays)}
    if not fit:
        return report
    if out and not Path(out).is_dir() and Path(out).exists():
        raise SpecError(f"--out {out}: with --measured-dir, a folder for the profiles")
    report["held_out"], report["profiles"] = [], []
    for engine in engines:
        mine = [r for r in replays if r.target.engine == engine]
        defaults = end_to_end.engine_defaults(engine)
        shares = compute_share.Shares(mine, bases[kernels[engine]], end_to_end.replay_again,
                                      defaults.compute_shares, defaults.host_floors)
        held = shares.leave_one_group_out()
        bounds = {kind: end_to_end.interval_bounds(held.ratios[kind], LEVEL)
                  for kind in ("ttft", "tpot")}
        by_the_others = {kind: end_to_end.coverage_by_the_others(held.ratios[kind], LEVEL)
                         for kind in bounds}
        for index, (key, group) in enumerate(held.groups.items()):
            coverage = {kind: end_to_end.coverage(held.ratios[kind][index], bounds[kind])
                        for kind in bounds}
            report["held_out"].append({
                "engine": key[0], "gpu": key[1], "model": key[2], **group,
                "overheads": group["overheads"].tolist(), "interval_coverage": coverage,
                "interval_coverage_by_the_others": {kind: per_group[index] for kind, per_group
                                                    in by_the_others.items()}})
        chosen = shares.fit()
        full = chosen.fit
        entry = {"engine": engine, "overheads_s": full.overheads.tolist(),
                 "compute_share": chosen.share,
                 "host_floor_s": None if chosen.host_floor is None else list(chosen.host_floor),
                 "fitted": full.fitted,
                 "at_bound": full.at_bound + engine_profiles.floor_edges(chosen.host_floor,
                                                                    defaults.host_floors),
                 "interval": {kind: list(b) for kind, b in bounds.items()},
                 "groups": len(held.groups)}
        if out and engine in ENGINE_NAMES:
            errors = [g["mape_tpot"] for g in held.groups.values()]
            entry["wrote"] = _write_measured_profiles(
                Path(out), chosen, kernels[engine], profile is not None, engine, mine,
                bounds, len(held.groups), (min(errors), max(errors)))
        report["profiles"].append(entry)
    return report


PROFILE_GPUS = {"h100-sxm": "h100-sxm", "h200": "h200"}  # GPU key -> profile name prefix


def _write_measured_profiles(folder, chosen, profile, given, engine, replays, bounds,
                             groups, tpot_errors) -> list[str]:
    from rooftui.sweeps import end_to_end, end_to_end_data, engine_profiles

    base, full = chosen.assumptions, chosen.fit

    written = []
    dataset = end_to_end_data.SILICON_FILE
    for gpu in sorted({r.target.gpu for r in replays}):
        models = sorted({r.target.model for r in replays if r.target.gpu == gpu})
        name = f"{PROFILE_GPUS.get(gpu, gpu)}-{engine}.toml"
        command = ("sweep replay --measured-dir MEASURED_DIR "
                   + (f"--profile {profile} " if given else "") + f"--fit --out {folder}/")
        text = engine_profiles.engine_profile_text(
            base, end_to_end.with_overheads(base, full.overheads).efficiency,
            command=command,
            description=f"{engine} on {gpu}: {profile}'s kernels"
                        + (f" at {chosen.share:g} of their compute rate (mfu)"
                           if chosen.share != 1 else "")
                        + (f", steps no shorter than its host's time (overlap scheduler: "
                           f"{_floor_text(chosen.host_floor)})"
                           if _floor_text(chosen.host_floor) else "")
                        + (f", plus {engine}'s {_fitted_text(full.fitted)}"
                           if full.fitted else "") + ", fitted end to end on "
                        f"{len(replays)} runs ({', '.join(models)} on this GPU); held-out "
                        f"TPOT MAPE {100 * tpot_errors[0]:.0f}-{100 * tpot_errors[1]:.0f} % "
                        "per (GPU, model) group (docs/end-to-end.md)",
            calibration={"gpu": gpu, "kind": "end_to_end", "engine": engine, "base": profile,
                         "rows": len(replays), "compute_share": chosen.share,
                         **({"host_floor_s": list(chosen.host_floor)}
                            if chosen.host_floor is not None else {}),
                         "fitted": full.fitted,
                         "at_bound": full.at_bound, "dataset": dataset},
            interval={"level": LEVEL, "ratios": bounds,
                      "held_out": f"leave-one-group-out over {groups} (engine, GPU, model) "
                                  f"groups of {dataset}"},
            sources={dataset: "ai-dynamo/aiconfigurator@095f58a silicon_sample.csv"})
        written.append(str(engine_profiles.write_engine_profile(folder / name, text)))
    return written


STEP_OVERHEAD_NAMES = {"step_overhead_s": "step", "layer_overhead_s": "layer",
                       "allreduce_overhead_s": "all-reduce"}


def _fitted_text(fitted: list[str]) -> str:
    """What an engine profile's fit added: "step, layer and all-reduce overheads and its
    per-request front end", or a part of it."""
    steps = [label for name, label in STEP_OVERHEAD_NAMES.items() if name in fitted]
    parts = [" and ".join(filter(None, (", ".join(steps[:-1]), steps[-1]))) + " overheads"
             ] if steps else []
    if "request_overhead_s" in fitted:
        parts.append("per-request front end")
    return " and its ".join(parts)


def _floor_text(floor) -> str:
    """A host floor (host_step_s, host_sequence_s) in words ("" for none or zero)."""
    if not floor or not any(floor):
        return ""
    return f"{units.seconds(floor[0])} a step plus {units.seconds(floor[1])} a sequence"


def _group_rows(replays) -> list[dict]:
    from rooftui.sweeps import end_to_end

    rows = []
    for key in sorted({end_to_end.group_key(r) for r in replays}):
        mine = [r for r in replays if end_to_end.group_key(r) == key]
        rows.append({"engine": key[0], "gpu": key[1], "model": key[2], "runs": len(mine),
                     "mape_ttft": end_to_end.mape(mine, "ttft"),
                     "mape_tpot": end_to_end.mape(mine, "tpot")})
    return rows


def _percent(value) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{100 * value:+.1f} %"


def _mape(value) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def render(report: dict) -> str:
    lines = [f"profile {report['profile']}"]
    if "groups" in report:
        lines += [f"{report['runs']} runs replayed", *(f"  note: {n}" for n in report["notes"]),
                  "", f"  {'engine':<10}{'GPU':<10}{'model':<14}{'runs':>6}"
                      f"{'TTFT MAPE':>12}{'TPOT MAPE':>12}"]
        lines += [f"  {g['engine']:<10}{g['gpu']:<10}{g['model']:<14}{g['runs']:>6}"
                  f"{_mape(g['mape_ttft']):>12}{_mape(g['mape_tpot']):>12}"
                  for g in report["groups"]]
    else:
        lines += ["", f"  {'run':<34}{'load':>14}{'TTFT':>22}{'TPOT':>22}{'tok/s':>22}"]
        for row in report["runs"]:
            lines.append(_run_line(row))
    if report.get("held_out"):
        lines += ["", "held out (fitted on the engine's other groups):",
                  f"  {'engine':<10}{'GPU':<10}{'model':<14}{'runs':>6}"
                  f"{'TTFT MAPE':>12}{'TPOT MAPE':>12}{'TPOT bias':>12}"
                  f"{'in 80 % TTFT':>14}{'TPOT':>8}{'others: TTFT':>14}{'TPOT':>8}"]
        lines += [f"  {g['engine']:<10}{g['gpu']:<10}{g['model']:<14}{g['runs']:>6}"
                  f"{_mape(g['mape_ttft']):>12}{_mape(g['mape_tpot']):>12}"
                  f"{_percent(g['bias_tpot']):>12}"
                  f"{_mape(g['interval_coverage']['ttft']):>14}"
                  f"{_mape(g['interval_coverage']['tpot']):>8}"
                  f"{_mape(g['interval_coverage_by_the_others']['ttft']):>14}"
                  f"{_mape(g['interval_coverage_by_the_others']['tpot']):>8}"
                  for g in report["held_out"]]
        lines.append("  (in 80 %: inside the engine's interval, drawn from every group's "
                     "held-out runs; others: inside one drawn from the other groups' alone)")
        for entry in report["profiles"]:
            *steps, front_end = entry["overheads_s"]  # end_to_end.OVERHEADS' order
            host = _floor_text(entry.get("host_floor_s"))
            fitted = [f"{label} {units.seconds(value)}" for (name, label), value in zip(
                STEP_OVERHEAD_NAMES.items(), steps, strict=True) if name in entry["fitted"]]
            lines.append(f"  {entry['engine']}: compute at {entry['compute_share']:g} of the "
                         "kernel profile's rate, "
                         + (f"host floor {host}, " if host else "")
                         + "".join(f"{text}, " for text in fitted)
                         + f"front end {units.seconds(front_end)} a request"
                         + (f" (at bound: {', '.join(entry['at_bound'])})"
                            if entry["at_bound"] else "")
                         + f"; 80 % interval TTFT {entry['interval']['ttft']}, "
                           f"TPOT {entry['interval']['tpot']}")
            lines += [f"    wrote {path}" for path in entry.get("wrote", [])]
    if "fit" in report:
        f = report["fit"]
        host = _floor_text(f.get("host_floor_s"))
        lines += ["", "fitted: " + ", ".join(
                      ([f"host floor {host}"] if host else [])
                      + [f"{k} {units.seconds(v)}" for k, v in f["overheads_s"].items()
                         if k in f["fitted"]])
                  + (f" (at bound: {', '.join(f['at_bound'])})" if f["at_bound"] else ""),
                  f"  in-sample MAPE: TTFT {_mape(f['mape_ttft'])}, TPOT {_mape(f['mape_tpot'])}"]
        lines += [_run_line(row) for row in f["runs_after"]]
        if "wrote" in f:
            lines.append(f"  wrote {f['wrote']}")
    return "\n".join(lines)


def _run_line(row: dict) -> str:
    load = (f"c={row['concurrency']}{' in step' if row['clients'] == 'in-step' else ''}"
            if row["concurrency"] else
            f"{row['request_rate']:g} req/s" if row["request_rate"] else "all at 0")
    cells = []
    for key, measured in (("ttft", row["ttft_s"]["mean"]), ("tpot", row["tpot_s"]["mean"])):
        predicted = row["predicted"][f"{key}_s"]["mean"]
        cells.append(f"{_seconds(measured):>9}→{_seconds(predicted):<9}"
                     f"{_percent(row['errors'][key]):>4}")
    throughput = row["output_throughput_tokens_per_s"]
    cells.append(f"{_count(throughput):>9}→{_count(row['predicted']['output_throughput']):<9}"
                 f"{_percent(row['errors']['output_throughput']):>4}")
    hits = row["predicted"]["prefix_hit_rate"]
    return (f"  {row['source'][-34:]:<34}{load:>14}  " + "".join(f"{c:>22}" for c in cells)
            + ("" if hits is None else f"  {hits:.0%} of prompt tokens cached"))


def _seconds(value) -> str:
    return "—" if value is None else units.seconds(value)


def _count(value) -> str:
    return "—" if value is None else f"{value:,.0f}"
