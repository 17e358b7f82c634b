"""The dynamic loop against simulations recorded before it was restructured (issue 19:
decode-only stretches skip the scheduling, flat step records, a leaner step costing): the
digests of every per-request and per-step array must stay the same, bit for bit.

`python tests/unit/test_simulation_recorded.py` prints the digests of the code it imports
(RECORDED were printed by commit afe7641)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.assumptions import load_profile
from rooftui.core.hardware import load_gpu
from rooftui.core.lengths import parse_distribution
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig
from rooftui.core.prefix_cache import CacheConfig
from rooftui.core.scheduler import STEP_COLUMNS, SchedulerConfig, StepCosts, simulate
from rooftui.core.sessions import parse_generator
from rooftui.core.workloads import Workload

# (model, profile, GPU memory GB, workload lengths, arrival, scheduler settings): dense,
# sliding-window and MoE models, ideal and calibrated profiles, open and closed arrivals,
# reserved and paged KV (a small memory so that paged runs preempt)
CASES = [
    ("llama-3-8b", "ideal", None, ("exp:mean=600,cap=4000", "exp:mean=150,cap=800"),
     "closed", {"policy": "chunked", "max_batch": 64, "token_budget": 512}),
    ("llama-3-8b", "derated", None, ("exp:mean=600,cap=4000", "exp:mean=150,cap=800"),
     "poisson:rate=20", {"policy": "chunked", "max_batch": 32, "token_budget": 256}),
    ("llama-3-8b", "derated", 20, ("exp:mean=900,cap=3000", "exp:mean=300,cap=1500"),
     "closed", {"policy": "chunked", "max_batch": 128, "token_budget": 1024,
                "kv_admission": "paged"}),
    ("gemma-2-9b", "ideal", 30, ("exp:mean=3000,cap=9000", "exp:mean=400,cap=2000"),
     "poisson:rate=5", {"policy": "chunked", "max_batch": 48, "token_budget": 2048,
                        "kv_admission": "paged", "block_size": 32}),
    ("mixtral-8x7b", "h100-trtllm", 120, ("exp:mean=500,cap=2000", "exp:mean=100,cap=600"),
     "gamma:rate=30,cv=2", {"policy": "chunked", "max_batch": 96, "token_budget": 4096}),
    ("llama-3-8b", "ideal", None, ("exp:mean=600,cap=4000", "exp:mean=150,cap=800"),
     "closed", {"policy": "continuous", "max_batch": 64}),
    ("gemma-2-9b", "derated", 30, ("exp:mean=3000,cap=9000", "exp:mean=400,cap=2000"),
     "poisson:rate=4", {"policy": "continuous", "max_batch": 32, "token_budget": 8192,
                        "kv_admission": "paged"}),
    ("llama-3-8b", "derated", 20, ("exp:mean=900,cap=3000", "exp:mean=300,cap=1500"),
     "closed", {"policy": "static", "max_batch": 64}),
    # light loads: long stretches of decodes alone
    ("llama-3-8b", "derated", None, ("exp:mean=600,cap=4000", "exp:mean=300,cap=1500"),
     "poisson:rate=1.5", {"policy": "chunked", "max_batch": 64, "token_budget": 512}),
    ("gemma-2-9b", "h100-trtllm", None, ("exp:mean=3000,cap=9000", "exp:mean=400,cap=2000"),
     "poisson:rate=0.5", {"policy": "continuous", "max_batch": 16}),
]
SESSION_SPEC = ("sessions:turns=4,system=700,first=(exp:mean=400),growth=(exp:mean=150),"
                "output=(exp:mean=120),think=3")
SESSION_CASES = [  # (policy, kv admission, cache)
    ("chunked", "paged", CacheConfig()),
    ("continuous", "reserve", CacheConfig(hbm_gb=0, cpu_gb=100, cpu_bandwidth_gbs=8.0)),
]
REQUESTS = 1500


def config(model: str, profile: str, memory_gb) -> PointConfig:
    gpu = load_gpu("h100-sxm")
    if memory_gb is not None:
        gpu = gpu.with_overrides(memory_gb=memory_gb)
    return PointConfig(gpu=gpu, model=load_model(model), assumptions=load_profile(profile))


def digest(simulation) -> str:
    arrays = [simulation.first_token_s, simulation.finish_s, simulation.preemptions,
              simulation.resume_gaps_s, simulation.arrivals]
    arrays += [simulation.steps[name] for name in STEP_COLUMNS]
    hasher = hashlib.sha256()
    for array in arrays:
        hasher.update(np.ascontiguousarray(array).tobytes())
    if simulation.prefix_cache is not None:
        hasher.update(json.dumps(simulation.prefix_cache, sort_keys=True).encode())
    return hasher.hexdigest()


def simulations(remember_decode_times: bool = False):
    """(name, simulation) of every recorded case; with remembered decode times (the
    optimizer's), the cases of CASES only."""
    for index, (model, profile, memory, (prompt, output), arrival, scheduler) in \
            enumerate(CASES):
        point = config(model, profile, memory)
        workload = Workload("case", parse_distribution(prompt, "input_tokens"),
                            parse_distribution(output))
        requests = workload.requests(REQUESTS, parse_arrivals(arrival), seed=index)
        costs = StepCosts(point.step_inputs(), point.assumptions, scheduler["max_batch"])
        if remember_decode_times:
            costs.remember_decode_times()
            simulate(point.step_inputs(), point.assumptions, SchedulerConfig(**scheduler),
                     requests, costs)  # the second run's decode steps are all remembered
        yield f"case {index}", simulate(point.step_inputs(), point.assumptions,
                                        SchedulerConfig(**scheduler), requests, costs)
    if remember_decode_times:
        return
    point = config("llama-3-8b", "ideal", None)
    for index, (policy, admission, cache) in enumerate(SESSION_CASES):
        sessions = parse_generator(SESSION_SPEC).requests(
            600, parse_arrivals("poisson:rate=3"), seed=index)
        yield f"sessions {index}", simulate(
            point.step_inputs(), point.assumptions,
            SchedulerConfig(policy=policy, kv_admission=admission), sessions.requests,
            prefix_cache=cache, sessions=sessions)


RECORDED = {
    "case 0": "d2b798deaa14bd4d44f71ec4987b2fa59e8be0c50cc89a1c32e84c1306aedb0e",
    "case 1": "34ca5c1985317428b9bbeaad629f288039335c29da05d46072fceab87fbc9463",
    "case 2": "3334dc2ebfee69c257978913940e01a046c7d149be7e10dc02e849beb69644de",
    "case 3": "396f675f99a7e9f1fff14796581b752f3e82eb3ae1ff0030b005a64d6720c38a",
    "case 4": "07775b658c26bc081060e9837f91c8c01f39a0c9307fa28d53152fb0f67a2cfb",
    "case 5": "54db85edc6e19c1df1833861bba086f81bacfbd5942f3fb4d55a6ea66a25134f",
    "case 6": "062317ed56fd8dc673c22545a3e08c0c9745b549f21a9e5c87b59c09ed9e4b89",
    "case 7": "14a0f52aa1550930fb349e6998690f31abe6c0749b838c941fcc71bf60f392fc",
    "case 8": "b479d03f58c368467f7c2652f7b5a7d0184d84d73423b5f444535431154c3b08",
    "case 9": "7598c41feb1212b23c1e94178188f69fb146471cae7cae500c4942df8436c49a",
    "sessions 0": "ad1293956bd9ab8667e287f9622fcd0f4c5f5b2c95c702e7fce1f20120272884",
    "sessions 1": "0a329f02efd9ec972021f74b8567a3cff00297e21d506c7a63830e9cc14c14c1",
}


@pytest.mark.parametrize("name", list(RECORDED))
def test_the_loop_gives_the_recorded_simulations_bit_for_bit(name, recorded_runs):
    assert digest(recorded_runs[name]) == RECORDED[name]


@pytest.fixture(scope="module")
def recorded_runs():
    return dict(simulations())


def test_remembered_decode_times_give_the_recorded_simulations():
    for name, simulation in simulations(remember_decode_times=True):
        assert digest(simulation) == RECORDED[name], name


if __name__ == "__main__":
    print(json.dumps({name: digest(simulation) for name, simulation in simulations()},
                     indent=1))
