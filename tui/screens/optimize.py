"""The Optimize view: `sweep optimize` in the terminal.

Choose the objective (TTFT and TPOT in seconds, the share of requests that must meet both),
the workload and the candidates (max batches and token budgets); `r` runs the search in a
worker thread. Each candidate lands in the heatmap as it is done: its sustained request
rate, or the letter of why it lost (the legend under the table). At the end: the best,
the Pareto frontier of tokens/s per GPU against tokens/s per user (a table and a log-log
plot), and `o` opens the best configuration's full mixed step (its max batch decoding at
the workload's mean context, plus the prefill its budget leaves) in the Explorer. The GPU,
model, dtypes, profile and tensor parallelism are the Explorer's when the view opens.

The search is `sweep optimize`'s candidate by candidate (`rooftui.tui.optimize_search`),
so the numbers are the CLI's; the status line follows each candidate's simulations; a new
run (or `c`) abandons the one in flight (it stops before its next simulation) and a stale
candidate is never drawn (each carries its run's number). The view is one for the app's
life: leaving it and coming back keeps its fields and results. It bounds requests and
candidates below the CLI (a simulation keeps every request's timings).
Every field accepts what the CLI's option of the same meaning accepts (`rooftui.core.
limits`): a value outside it marks the field and the status line says why; a search that
fails says so there too, and the view stays open.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Select, Static
from textual.worker import get_current_worker

from rooftui.core import units
from rooftui.core.errors import SpecError
from rooftui.core.spec_files import shipped_names
from rooftui.core.workloads import load_workload
from rooftui.sweeps.optimize import (
    DEFAULT_REQUESTS,
    REASONS,
    Candidate,
    Objective,
    Problem,
    Result,
)
from rooftui.tui.failures import failure_text
from rooftui.tui.keys import LEAVE_FIELD, KeyboardScreen
from rooftui.tui.number_fields import ParsedValidator, parse_number, parse_numbers
from rooftui.tui.optimize_search import (
    MAX_CANDIDATES,
    MAX_REQUESTS,
    Abandoned,
    check_bounds,
    search,
)
from rooftui.tui.settings import ExplorerSettings
from rooftui.tui.widgets.controls import NumberInput
from rooftui.tui.widgets.footer import CoalescingFooter
from rooftui.tui.widgets.pareto_plot import ParetoPlot

# (field id, label, default text, how its text is read: `sweep optimize`'s bounds)
FIELDS = (
    ("slo-ttft", "TTFT ≤ s", "2", lambda text: parse_number(text, "slo_ttft", "TTFT")),
    ("slo-tpot", "TPOT ≤ s", "0.1", lambda text: parse_number(text, "slo_tpot", "TPOT")),
    ("attainment", "share", "0.9", lambda text: parse_number(text, "attainment", "share")),
    ("batches", "batches", "8,16,32,64,128,256",
     lambda text: parse_numbers(text, "max_batch", "batches")),
    ("budgets", "budgets", "256,512,1024,2048,4096",
     lambda text: parse_numbers(text, "token_budget", "budgets")),
    ("requests", "requests", str(DEFAULT_REQUESTS),
     lambda text: _requests(parse_number(text, "requests", "requests"))),
)


def _requests(requests: int) -> int:
    check_bounds(requests, [], [])  # the view's bound, below the CLI's
    return requests

READERS = {field: read for field, _, _, read in FIELDS}
READY = (f"r: run the search (here: up to {MAX_REQUESTS:,} requests and "
         f"{MAX_CANDIDATES} candidates)")
NARROW_COLUMNS = 120  # below, the Pareto plot without the frontier table beside it
RUN_KEYS = "rco"  # never part of a number: the screen's keys, even from a field
SHADES = ("#3b0f70", "#641a80", "#8c2981", "#de4968", "#fe9f6d", "#fcfdbf")  # magma, low→high


class OptimizeForm(VerticalScroll, can_focus=False):
    """The objective, workload and candidates: Tab goes from field to field (the
    scrolling container takes no focus of its own)."""


class OptimizeScreen(KeyboardScreen):
    BINDINGS = [
        # the fields hold numbers and commas: r, c and o act even while one has focus
        # (the fields leave them to these bindings)
        Binding("r", "run", "Run", id="optimize-run", priority=True),
        Binding("c", "abandon", "Cancel", id="optimize-cancel", priority=True),
        Binding("o", "open_best", "Open best", id="optimize-open-best", priority=True),
        Binding("escape", "app.pop_screen", "Back", id="optimize-back"),
        LEAVE_FIELD,
    ]

    DEFAULT_CSS = """
    #optimize-body { height: 1fr; }
    #optimize-form { width: 30; height: 1fr; padding: 0 1 0 0;
                     border-right: vkey $surface-lighten-2; }
    #optimize-form .control-row { height: 1; }
    #optimize-form Label { width: 9; color: $text-muted; }
    #optimize-form Input, #optimize-form Select { width: 1fr; }
    #optimize-status { margin-top: 1; height: auto; }
    #optimize-results { width: 1fr; height: 1fr; padding: 0 0 0 1; }
    #optimize-best { height: auto; }
    #optimize-heatmap { height: auto; max-height: 14; }
    #optimize-legend { height: auto; color: $text-muted; }
    #optimize-lower { height: 1fr; }
    #optimize-frontier { width: 48; height: 1fr; }
    /* narrow: the frontier's points are the plot's, which gets the width */
    OptimizeScreen.-narrow #optimize-frontier { display: none; }
    """

    class CandidateDone(Message):
        def __init__(self, run: int, candidate: Candidate) -> None:
            super().__init__()
            self.run = run
            self.candidate = candidate

    class Simulating(Message):
        """Run `run` starts a simulation of candidate (batch, budget)."""

        def __init__(self, run: int, batch: int, budget: int) -> None:
            super().__init__()
            self.run = run
            self.batch = batch
            self.budget = budget

    class SearchDone(Message):
        """The search of run `run` finished (`result`) or was refused (`error`)."""

        def __init__(self, run: int, result: Result | None, error: str | None = None) -> None:
            super().__init__()
            self.run = run
            self.result = result
            self.error = error

    def __init__(self, settings: ExplorerSettings | None = None, *,
                 hires: str = "halfblock") -> None:
        super().__init__(id="optimize")
        self.settings = settings or ExplorerSettings()
        self.result: Result | None = None
        self._hires = hires
        self._run = 0
        self._batches: list[int] = []
        self._budgets: list[int] = []
        self._candidates: list[Candidate] = []
        self._policy_chunked = True
        self._searching = False  # not `_running`: Textual's own, of the message loop
        self._simulations = 0  # of the candidate in flight
        self._refused = False  # the status line says why a value or a search was refused

    def compose(self) -> ComposeResult:
        with Horizontal(id="optimize-body"):
            with OptimizeForm(id="optimize-form"):
                yield Static(self._configuration(), id="optimize-configuration")
                with Horizontal(classes="control-row"):
                    yield Label("workload")
                    yield Select([(name, name) for name in shipped_names("workloads")],
                                 value="sharegpt-8k", allow_blank=False, compact=True,
                                 id="optimize-workload")
                for field, label, default, read in FIELDS:
                    with Horizontal(classes="control-row"):
                        yield Label(label)
                        yield NumberInput(default, compact=True, id=f"optimize-{field}",
                                          leaves=RUN_KEYS, validators=[ParsedValidator(read)],
                                          validate_on=["changed"])
                yield Static(READY, id="optimize-status")
            with Vertical(id="optimize-results"):
                yield Static("", id="optimize-best")
                yield DataTable(id="optimize-heatmap", cursor_type="none", zebra_stripes=False)
                yield Static("", id="optimize-legend")
                with Horizontal(id="optimize-lower"):
                    yield DataTable(id="optimize-frontier", cursor_type="row")
                    yield ParetoPlot(hires=self._hires, id="optimize-pareto")
        yield CoalescingFooter()

    def on_resize(self) -> None:
        self.set_class(self.size.width < NARROW_COLUMNS, "-narrow")

    def follow(self, settings: ExplorerSettings) -> None:
        """The Explorer's configuration, when the view opens again: the fields and the
        last results stay (they say which configuration they are for)."""
        if settings == self.settings or self._searching:
            return
        self.settings = settings
        if self.is_mounted:
            self.query_one("#optimize-configuration", Static).update(self._configuration())
            if self._candidates:
                self._status("the results are for the previous configuration; r runs "
                             "for this one")

    def _configuration(self) -> str:
        s = self.settings
        tp = f" × {s.tp}" if s.tp > 1 else ""
        return f"{s.model} on {s.gpu}{tp}\nprofile {s.profile}\n"

    # --- the search ----------------------------------------------------------------------
    def _inputs(self) -> tuple[Problem, Objective, list[int], list[int]]:
        """What the fields say; a SpecError for the first one that is refused."""
        def value(field: str):
            return READERS[field](self.query_one(f"#optimize-{field}", Input).value)

        objective = Objective(ttft_s=value("slo-ttft"), tpot_s=value("slo-tpot"),
                              attainment=value("attainment"))
        workload = load_workload(str(self.query_one("#optimize-workload", Select).value))
        problem = Problem(config=self.settings.with_changes(
            batch=1, prefill=0).config(), workload=workload, requests=value("requests"))
        batches, budgets = value("batches"), value("budgets")
        check_bounds(problem.requests, list(dict.fromkeys(batches)),
                     list(dict.fromkeys(budgets)))
        return problem, objective, batches, budgets

    def action_run(self) -> None:
        try:
            problem, objective, batches, budgets = self._inputs()
        except Exception as error:  # a refused field or configuration, said in place
            self._refusal(failure_text(error))
            return
        self._run += 1
        self.result, self._candidates = None, []
        self._batches, self._budgets = list(dict.fromkeys(batches)), list(dict.fromkeys(budgets))
        self._policy_chunked = problem.policy == "chunked"
        self._reset_tables()
        self.query_one("#optimize-best", Static).update("")
        self.query_one(ParetoPlot).clear()
        self._simulations = 0
        self._status(f"searching {len(self._batches) * len(self._budgets)} candidates …")
        self._searching = True
        self._search(self._run, problem, objective, self._batches, self._budgets)

    def on_input_submitted(self) -> None:
        self.action_run()

    def on_input_changed(self) -> None:
        """A refused value is said at once (its validator marks the field red), and
        once every field is valid again, so is that."""
        values = {}
        for field, read in READERS.items():
            try:
                values[field] = read(self.query_one(f"#optimize-{field}", Input).value)
            except SpecError as error:
                self._refusal(str(error))
                return
        try:  # each field may be fine, and their product too many candidates
            check_bounds(values["requests"], list(dict.fromkeys(values["batches"])),
                         list(dict.fromkeys(values["budgets"])))
        except SpecError as error:
            self._refusal(str(error))
            return
        if self._refused and not self._searching:
            self._status(READY)

    @work(thread=True, exclusive=True, group="optimize")
    def _search(self, run: int, problem: Problem, objective: Objective, batches: list[int],
                budgets: list[int]) -> None:
        worker = get_current_worker()

        def check(batch: int, budget: int) -> None:
            if worker.is_cancelled or run != self._run:
                raise Abandoned
            self.post_message(self.Simulating(run, batch, budget))

        try:
            result = search(problem, objective, batches, budgets,
                            on_candidate=lambda c: self.post_message(
                                self.CandidateDone(run, c)),
                            before_simulation=check)
        except Abandoned:
            return
        except Exception as error:  # said in place: an escaping one would end the app
            self.post_message(self.SearchDone(run, None, failure_text(error)))
            return
        self.post_message(self.SearchDone(run, result))

    def action_abandon(self) -> None:
        if self._searching:
            self._run += 1  # the worker stops before its next simulation
            self._searching = False
            self.workers.cancel_group(self, "optimize")
            self._status("cancelled; r runs again")

    def on_optimize_screen_candidate_done(self, message: CandidateDone) -> None:
        if message.run != self._run:
            return
        self._candidates.append(message.candidate)
        self._simulations = 0
        self._fill_heatmap()
        total = len(self._batches) * len(self._budgets)
        self._status(f"{len(self._candidates)} / {total} candidates …")

    def on_optimize_screen_simulating(self, message: Simulating) -> None:
        """Progress within a candidate: its simulations so far (a candidate's rate
        search runs a dozen or more)."""
        if message.run != self._run:
            return
        self._simulations += 1
        total = len(self._batches) * len(self._budgets)
        self._status(f"{len(self._candidates)} / {total} candidates · max batch "
                     f"{message.batch:,}, budget {message.budget:,}: simulation "
                     f"{self._simulations} …")

    def on_optimize_screen_search_done(self, message: SearchDone) -> None:
        if message.run != self._run:
            return
        self._searching = False
        if message.error is not None:
            self._refusal(message.error)
            return
        self.result = message.result
        self._candidates = list(message.result.candidates)
        self._fill_heatmap()
        self._show_best()
        self._show_frontier()
        simulations = sum(c.simulations for c in self._candidates)
        self._status(f"done: {len(self._candidates)} candidates, {simulations:,} simulations"
                     + ("; o opens the best in the Explorer" if self.result.best else ""))

    def action_open_best(self) -> None:
        best = self.result.best if self.result else None
        if best is None:
            self._status("no best configuration yet: r runs the search")
            return
        prefill = best.token_budget - best.max_batch if self._policy_chunked else 0
        self.app.open_in_explorer(self.settings.with_changes(
            batch=best.max_batch, context=max(1, round(best.analytic.decode_context)),
            prefill=max(0, prefill)))

    # --- drawing ---------------------------------------------------------------------------
    def _status(self, markup: str) -> None:
        self._refused = False
        self.query_one("#optimize-status", Static).update(Text.from_markup(markup))

    def _refusal(self, reason: str) -> None:
        """A red status line (plain text: a value the user typed is never markup)."""
        self._refused = True
        self.query_one("#optimize-status", Static).update(Text(reason, style="red"))

    def _reset_tables(self) -> None:
        heatmap = self.query_one("#optimize-heatmap", DataTable)
        heatmap.clear(columns=True)
        heatmap.add_column("B \\ T", key="batch")
        for budget in self._budgets:
            heatmap.add_column(f"{budget:,}", key=str(budget))
        for batch in self._batches:
            heatmap.add_row(f"{batch:,}", *([""] * len(self._budgets)), key=str(batch))
        frontier = self.query_one("#optimize-frontier", DataTable)
        frontier.clear(columns=True)
        for heading in ("B", "T", "req/s", "tok/s/GPU", "tok/s/user"):
            frontier.add_column(heading, key=heading)
        self.query_one("#optimize-legend", Static).update("")

    def _fill_heatmap(self) -> None:
        heatmap = self.query_one("#optimize-heatmap", DataTable)
        rates = [c.rate for c in self._candidates if c.rate]
        low, high = (min(rates), max(rates)) if rates else (0.0, 1.0)
        best = self.result.best if self.result else None
        for c in self._candidates:
            if c.rate is None:
                cell = Text(REASONS[c.reason][2], style="dim")
            else:
                place = 0.0 if high <= low else (c.rate - low) / (high - low)
                shade = SHADES[min(len(SHADES) - 1, int(place * len(SHADES)))]
                text = f"{c.rate:,.3g}" + ("*" if c is best else "")
                cell = Text(text, style=f"bold black on {shade}" if place > 0.5
                            else f"white on {shade}")
            heatmap.update_cell(str(c.max_batch), str(c.token_budget), cell, update_width=True)
        used = [code for code in REASONS if code and any(c.reason == code
                                                         for c in self._candidates)]
        legend = " · ".join(f"{REASONS[code][2]}: {REASONS[code][1]}" for code in used)
        self.query_one("#optimize-legend", Static).update(
            "req/s sustained within the objective" + (f"; {legend}" if legend else "")
            + ("; *: the best" if best else ""))

    def _show_best(self) -> None:
        best = self.result.best
        if best is None:
            self.query_one("#optimize-best", Static).update(
                "no candidate meets the objective at any rate")
            return
        s = best.summary
        self.query_one("#optimize-best", Static).update(Text.from_markup(
            f"[b]best[/b]: max batch {best.max_batch:,}, budget {best.token_budget:,} · "
            f"{best.rate:,.3g} req/s · goodput {units.rate(best.goodput_tokens_per_s)} · "
            f"TTFT p90 {units.seconds(s['ttft_s']['p90'])} · TPOT p90 "
            f"{units.seconds(s['tpot_s']['p90']) if s['tpot_s'] else '—'}\n"
            f"{units.rate(best.tokens_per_s_per_gpu)} per GPU · "
            f"{units.rate(best.per_user_tokens_per_s)} per user · "
            f"{units.percent(s['slo_attainment'])} meet both"))

    def _show_frontier(self) -> None:
        frontier = self.query_one("#optimize-frontier", DataTable)
        for c in self.result.pareto:
            frontier.add_row(f"{c.max_batch:,}", f"{c.token_budget:,}", f"{c.rate:,.3g}",
                             f"{c.tokens_per_s_per_gpu:,.0f}",
                             f"{c.per_user_tokens_per_s:,.1f}")
        sustained = [c for c in self.result.candidates if c.per_user_tokens_per_s]
        self.query_one(ParetoPlot).draw(sustained, self.result.pareto, self.result.best)

