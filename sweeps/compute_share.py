"""An engine's sustained compute share, chosen out of sample with its overheads.

The share is the fraction of its kernel profile's compute rate (the profile's `mfu`, a
multiplier on every compute roof) that the engine's compute-bound work (prefill GEMMs and
attention) reaches in a serving run. Kernel benchmarks time short bursts of one kernel;
a serving run runs prefills back to back for minutes under its power and clock limits,
next to the decodes. The TensorRT-LLM silicon runs show the gap: their TPOT grows with
concurrency 1.5-2.3x as fast as the kernel timings predict, most where prefills dominate
(docs/end-to-end.md), which per-step, per-layer and per-all-reduce terms cannot follow.

A share moves which sequences share a step, so it is not a slope the overheads' affine
fit can carry: each share the engine allows (`EngineDefaults.compute_shares`) replays the
runs, the overheads are fitted on top (`end_to_end.fit_overheads`, replayed at the
result), and the share whose fit leaves the least loss (the fit's own: squared log errors
of mean TTFT and TPOT, groups weighted equally) wins. Leave-one-group-out makes that
choice per fold on the training groups only, as it fits the overheads. Only TensorRT-LLM
chooses from COMPUTE_SHARES: with the same choice, vLLM's and Splitwise's held-out
figures got worse (docs/end-to-end.md), so they keep their kernel profile's rate.

An engine whose scheduler overlaps the host with the GPU also chooses its host floor the
same way (`EngineDefaults.host_floors`: the least time a step takes, `host_step_s` plus
`host_sequence_s` per sequence, core.efficiency): a floor, like a share, moves which
steps the overheads lengthen, so each (share, floor) pair is its own candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rooftui.core.assumptions import Assumptions
from rooftui.sweeps import end_to_end
from rooftui.sweeps.end_to_end import (
    COMPUTE_SHARES,
    LOGO_ROUNDS,
    HeldOut,
    HostFloor,
    OverheadFit,
    Replay,
    at_host_floor,
    group_key,
)

ReplayAgain = Callable[[Replay, Assumptions], Replay]


def at_share(base: Assumptions, share: float) -> Assumptions:
    """`base` with its compute roofs at `share` of the rate it was fitted to."""
    return replace(base, mfu=base.mfu * share)


@dataclass
class ShareFit:
    share: float
    host_floor: HostFloor
    assumptions: Assumptions  # the kernel profile at that share and floor, no overheads
    fit: OverheadFit  # the overheads fitted on top of it, and its replays


class Shares:
    """One engine's replays at every (share, host floor) candidate (made once, reused by
    every fold)."""

    def __init__(self, replays: Sequence[Replay], base: Assumptions, replay: ReplayAgain,
                 shares: Sequence[float] = COMPUTE_SHARES,
                 host_floors: Sequence[HostFloor] = (None,)) -> None:
        self.replay = replay
        self.bases = {(share, floor): at_host_floor(at_share(base, share), floor)
                      for share in shares for floor in host_floors}
        self.replays = {key: list(replays) if self.bases[key] == base else
                        [replay(r, self.bases[key]) for r in replays] for key in self.bases}

    def fit(self, free: list[str] | None = None, leave_out: tuple | None = None,
            rounds: int = 4, final_replay: bool = True) -> ShareFit:
        """The share and overheads of least loss on the groups other than `leave_out`
        (`final_replay`: as `end_to_end.fit_overheads`)."""
        best = None
        for (share, floor), replays in self.replays.items():
            training = [r for r in replays if group_key(r) != leave_out]
            fit = end_to_end.fit_overheads(training, self.bases[share, floor], free=free,
                                           replay=self.replay, rounds=rounds,
                                           final_replay=final_replay)
            if best is None or fit.loss < best.fit.loss:
                best = ShareFit(share, floor, self.bases[share, floor], fit)
        return best

    def leave_one_group_out(self) -> HeldOut:
        """`end_to_end.leave_one_group_out` with the share chosen per fold as well."""
        def fit_fold(key: tuple, free: list[str]) -> tuple[Assumptions, OverheadFit]:
            # the training runs replayed at the fit only where their loss picks a share
            chosen = self.fit(free, leave_out=key, rounds=LOGO_ROUNDS,
                              final_replay=len(self.replays) > 1)
            return chosen.assumptions, chosen.fit

        key = next(iter(self.replays))  # any: the groups and their steps are the same
        return end_to_end.leave_one_group_out(self.replays[key], self.bases[key],
                                              self.replay, fit_fold)
