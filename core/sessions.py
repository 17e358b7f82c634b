"""Session-structured workloads: requests that re-send a growing conversation, with the
prefix blocks each one shares with earlier ones (`core.prefix_cache` looks them up).

Three sources, each giving `SessionRequests` (requests, their prompt blocks, and the turns
that wait for the previous turn's last token):
- a session trace CSV: `session_id`, `turn`, `input_tokens` (the whole prompt, previous
  turns included), `output_tokens`, and `arrival_s` or `think_time_s` (seconds after the
  previous turn's last token; a first turn takes `arrival_s`, or 0 without that column);
  optionally `system_tokens`, a system prompt at the head of the prompt, shared by every
  session with the same value. Assumed: turn t's prompt begins with turn t - 1's prompt
  and output, whole (a prompt shorter than that is refused), so the conversation is one
  chain of blocks per session;
- a trace with prefix block hashes (`hash_ids`: space-separated ids of the prompt's
  `HASH_BLOCK_TOKENS`-token blocks, the last one usually partial), such as the Mooncake
  FAST'25 traces (github.com/kvcache-ai/Mooncake, `FAST25-release/traces`), with
  `arrival_s`, `input_tokens`, `output_tokens`. The ids are chained (an id always follows
  the same id), so a shared id is a shared prefix; they cover the prompt only, so a
  request's output is never a hit for a later one (the trace cannot say which later ids
  it became);
- the generator `sessions:turns=T,system=S,first=F,growth=G,output=O,think=X`
  (`parse_generator`): sessions start at the `--arrival` process's times; each has T
  turns, a system prompt of S tokens shared by all sessions, a first user message of F
  tokens, G new user tokens each later turn, O output tokens each turn, and an
  exponential think time of mean X seconds after the previous turn's last token. Token
  parameters are a number or a length law in parentheses, `growth=(exp:mean=200)`
  (`core.lengths`; drawn per turn); T likewise (drawn per session).

Blocks: a session trace and the generator use the engine's block size, and cache only
full blocks of tokens whose KV some step computed: a prompt's, and after the last token
its prompt and output but the last sampled token (whose KV is never written). A hash-id
trace fixes the block at its own size and counts a hit on a partial last block at its
length. Either way a hit leaves at least the prompt's last token to compute (it yields
the first output token's logits).

Chains (see `core.prefix_cache`): a session is one chain after its system prompt's full
blocks, which are a chain of their own; a hash-id trace's ids are cut into chains where a
prefix branches.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rooftui.core import limits
from rooftui.core.arrivals import Arrivals
from rooftui.core.errors import SpecError
from rooftui.core.lengths import LengthDistribution, parse_distribution
from rooftui.core.workloads import Requests

HASH_BLOCK_TOKENS = 512  # Mooncake FAST25-release/README.md: 512-token blocks
SESSION_COLUMNS = ("session_id", "turn", "input_tokens", "output_tokens")
GENERATOR_KEYS = ("turns", "system", "first", "growth", "output", "think")
BRANCH = -2  # a parent with more than one child id


@dataclass(frozen=True)
class PromptBlocks:
    """Per request, the prefix blocks it can hit and those it leaves in the cache."""

    block_tokens: int
    prompt_runs: list[tuple[tuple[int, int], ...]]  # [(chain, blocks), ...] looked up
    finish_runs: list[tuple[tuple[int, int], ...]]  # cached once the request finishes

    def hit_tokens(self, blocks: int, prompt_tokens: int, input_tokens: int) -> int:
        """Tokens of a `blocks`-block hit: at most the input (a partial last block), and
        at least one prompt token left to compute."""
        return max(0, min(blocks * self.block_tokens, input_tokens, prompt_tokens - 1))


@dataclass(frozen=True)
class SessionRequests:
    """Requests with their prefix structure, in order of `requests.arrival_s`. A request
    with `previous[i] >= 0` arrives `think_s[i]` after request previous[i]'s last token;
    its arrival_s is then only the lower bound that orders it (the previous turn's bound
    plus the think time). Sessions and generated traffic keep `session` and
    `system_tokens` (blocks follow from the engine's block size); a hash-id trace keeps
    its blocks."""

    requests: Requests
    session: np.ndarray | None = None  # int64 per request
    system_tokens: np.ndarray | None = None  # int64 per request
    hashed: PromptBlocks | None = None
    previous: np.ndarray | None = None  # int64, -1 for requests with their own arrival
    think_s: np.ndarray | None = None
    name: str = ""

    def __len__(self) -> int:
        return len(self.requests)

    def blocks(self, block_tokens: int) -> PromptBlocks:
        """Each request's prompt runs and finish runs at `block_tokens` per block (a
        hash-id trace keeps its own block)."""
        if self.hashed is not None:
            return self.hashed
        b = int(block_tokens)
        r = self.requests
        shared = self.system_tokens // b  # the system prompt's full blocks: a chain of its own
        columns = [array.tolist() for array in (
            -1 - self.system_tokens, shared, self.session, r.input_tokens // b - shared,
            (r.input_tokens + r.output_tokens - 1) // b - shared)]
        rows = list(zip(*columns, strict=True))
        prompt = [((system, head), (session, own)) if head else ((session, own),)
                  for system, head, session, own, _ in rows]
        finish = [((system, head), (session, own)) if head else ((session, own),)
                  for system, head, session, _, own in rows]
        return PromptBlocks(b, prompt, finish)

    def head(self, count: int) -> SessionRequests:
        """The first `count` requests (a later turn's previous turn is always earlier)."""
        if count > len(self):
            raise SpecError(f"{self.name} has {len(self):,} requests; --requests must be at "
                            "most that (session traces are not replayed twice)")
        if count == len(self):
            return self
        r = self.requests

        def first(array):
            return None if array is None else array[:count]

        hashed = None if self.hashed is None else PromptBlocks(
            self.hashed.block_tokens, self.hashed.prompt_runs[:count],
            self.hashed.finish_runs[:count])
        return SessionRequests(
            Requests(r.arrival_s[:count], r.input_tokens[:count], r.output_tokens[:count]),
            first(self.session), first(self.system_tokens), hashed, first(self.previous),
            first(self.think_s), self.name)

    def scaled(self, speed: float) -> SessionRequests:
        """Times divided by `speed` (trace:PATH,speed=X)."""
        if speed == 1.0:
            return self
        r = self.requests
        return replace(self, requests=Requests(r.arrival_s / speed, r.input_tokens,
                                               r.output_tokens),
                       think_s=None if self.think_s is None else self.think_s / speed)


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except OSError as error:
        raise SpecError(f"{path}: cannot read: {error.strerror or error}") from None
    except (csv.Error, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: not a CSV file: {error}") from None
    if len(rows) < 2:
        raise SpecError(f"{path}: the trace has no rows")
    return [name.strip() for name in rows[0]], rows[1:]


def _cells(header: list[str], rows: list[list[str]], name: str) -> list[str]:
    index = header.index(name)
    return [row[index].strip() if index < len(row) else "" for row in rows]


def _numbers(path: Path, header: list[str], rows: list[list[str]], name: str,
             bound: str, blank_is_nan: bool = False) -> np.ndarray:
    values = np.empty(len(rows))
    for line, cell in enumerate(_cells(header, rows, name), start=2):
        if blank_is_nan and cell == "":
            values[line - 2] = math.nan
            continue
        try:
            value = float(cell)
        except ValueError:
            value = cell  # refused by the bound, with its range
        values[line - 2] = limits.check(bound, value, f"{path}: row {line}", name)
    return values


def is_session_trace(path: Path) -> bool:
    """Whether a CSV's header names a session trace or a hash-id trace."""
    try:
        with Path(path).expanduser().open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, csv.Error, UnicodeDecodeError):
        return False  # the trace reader reports it
    names = {name.strip() for name in header}
    return "session_id" in names or "hash_ids" in names


def read_session_trace(path: Path) -> SessionRequests:
    """A session trace CSV or a hash-id trace, by its header (see the module doc)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise SpecError(f"trace file not found: {path}")
    header, rows = _rows(path)
    if "hash_ids" in header:
        return _hash_id_trace(path, header, rows)
    missing = [name for name in SESSION_COLUMNS if name not in header]
    if missing or not {"arrival_s", "think_time_s"} & set(header):
        raise SpecError(f"{path}: a session trace needs columns {', '.join(SESSION_COLUMNS)} "
                        "and arrival_s or think_time_s; missing "
                        f"{', '.join(missing) or 'arrival_s and think_time_s'}")
    return _session_trace(path, header, rows)


def _session_trace(path: Path, header: list[str], rows: list[list[str]]) -> SessionRequests:
    count = len(rows)
    names = _cells(header, rows, "session_id")
    turn = _numbers(path, header, rows, "turn", "tokens")
    inputs = _numbers(path, header, rows, "input_tokens", "tokens").astype(np.int64)
    outputs = _numbers(path, header, rows, "output_tokens", "tokens").astype(np.int64)
    if inputs.min() < 1 or outputs.min() < 1:
        raise SpecError(f"{path}: input_tokens and output_tokens must be >= 1")
    nan = np.full(count, math.nan)
    arrival = (_numbers(path, header, rows, "arrival_s", "arrival_s", blank_is_nan=True)
               if "arrival_s" in header else nan)
    think = (_numbers(path, header, rows, "think_time_s", "think_time_s", blank_is_nan=True)
             if "think_time_s" in header else nan)
    system = (_numbers(path, header, rows, "system_tokens", "tokens").astype(np.int64)
              if "system_tokens" in header else np.zeros(count, np.int64))
    if np.any(system >= inputs):
        raise SpecError(f"{path}: system_tokens must be below input_tokens")
    order = sorted(range(count), key=lambda i: (names[i], turn[i]))
    session_index: dict[str, int] = {}
    previous_row = np.full(count, -1)
    for position, i in enumerate(order):
        before = order[position - 1] if position else -1
        session_index.setdefault(names[i], len(session_index))
        if before < 0 or names[before] != names[i]:
            continue
        where = f"{path}: session {names[i]!r} turn {turn[i]:g}"
        if turn[before] == turn[i]:
            raise SpecError(f"{where} appears twice")
        if inputs[i] < inputs[before] + outputs[before]:
            raise SpecError(f"{where}: the prompt ({inputs[i]:,} tokens) is shorter than the "
                            f"previous turn's prompt and output "
                            f"({inputs[before] + outputs[before]:,}); input_tokens is the "
                            "whole prompt, previous turns included")
        if system[i] != system[before]:
            raise SpecError(f"{where} changes system_tokens")
        previous_row[i] = before
    waits = (previous_row >= 0) & ~np.isnan(think)
    first_without_time = (previous_row < 0) & ("arrival_s" not in header)
    lacking = ~waits & np.isnan(arrival) & ~first_without_time
    if np.any(lacking):
        raise SpecError(f"{path}: row {int(np.flatnonzero(lacking)[0]) + 2} has neither "
                        "arrival_s nor a think_time_s after an earlier turn")
    bound = np.where(np.isnan(arrival), 0.0, arrival)
    for i in order:  # a session's turns in order, so the previous bound is final
        if waits[i]:
            bound[i] = bound[previous_row[i]] + think[i]
    sequence = np.lexsort((np.arange(count), bound))  # by time, then file order
    rank = np.empty(count, np.int64)
    rank[sequence] = np.arange(count)
    previous = np.where(waits, rank[np.maximum(previous_row, 0)], -1)[sequence]
    if np.any(previous >= np.arange(count)):
        raise SpecError(f"{path}: a turn with its own arrival_s comes before the turn it "
                        "follows")
    for i in order:  # a timed later turn must not precede its session's previous turn
        if previous_row[i] >= 0 and not waits[i] and rank[previous_row[i]] > rank[i]:
            raise SpecError(f"{path}: session {names[i]!r} turn {turn[i]:g} arrives before "
                            "its previous turn")
    session = np.array([session_index[name] for name in names], np.int64)
    any_wait = bool(np.any(waits))
    return SessionRequests(
        Requests(bound[sequence], inputs[sequence], outputs[sequence]),
        session=session[sequence], system_tokens=system[sequence],
        previous=previous if any_wait else None,
        think_s=np.where(waits, think, 0.0)[sequence] if any_wait else None, name=path.name)


def _hash_id_trace(path: Path, header: list[str], rows: list[list[str]]) -> SessionRequests:
    for name in ("arrival_s", "input_tokens", "output_tokens"):
        if name not in header:
            raise SpecError(f"{path}: a hash-id trace needs column {name!r}")
    arrival = _numbers(path, header, rows, "arrival_s", "arrival_s")
    if np.any(np.diff(arrival) < 0):
        raise SpecError(f"{path}: arrival_s must not decrease (row "
                        f"{int(np.flatnonzero(np.diff(arrival) < 0)[0]) + 3})")
    inputs = _numbers(path, header, rows, "input_tokens", "tokens").astype(np.int64)
    outputs = _numbers(path, header, rows, "output_tokens", "tokens").astype(np.int64)
    if inputs.min() < 1 or outputs.min() < 1:
        raise SpecError(f"{path}: input_tokens and output_tokens must be >= 1")
    ids = []
    for line, (cell, tokens_in) in enumerate(
            zip(_cells(header, rows, "hash_ids"), inputs.tolist(), strict=True), start=2):
        try:
            row_ids = [int(text) for text in cell.split()]
        except ValueError:
            raise SpecError(f"{path}: row {line}, column 'hash_ids': expected integers "
                            f"separated by spaces, got {cell[:40]!r}") from None
        if len(row_ids) != -(-tokens_in // HASH_BLOCK_TOKENS):
            raise SpecError(f"{path}: row {line} has {len(row_ids)} hash ids for "
                            f"{tokens_in:,} input tokens; expected one per "
                            f"{HASH_BLOCK_TOKENS}-token block")
        ids.append(row_ids)
    runs = hash_id_chains(ids, str(path))
    return SessionRequests(Requests(arrival - arrival[0], inputs, outputs),
                           hashed=PromptBlocks(HASH_BLOCK_TOKENS, runs, runs), name=path.name)


def hash_id_chains(ids: list[list[int]], where: str) -> list[tuple[tuple[int, int], ...]]:
    """Each request's ids as runs over chains: an id starts a chain where its parent (the
    id before it) has more than one distinct child, or it has none."""
    parent_of: dict[int, int] = {}
    child_of: dict[int, int] = {}  # parent (-1: the root) -> its one child, or BRANCH
    for row_ids in ids:
        parent = -1
        for block in row_ids:
            known = parent_of.setdefault(block, parent)
            if known != parent:
                raise SpecError(f"{where}: hash id {block} follows both {known} and {parent}; "
                                "the ids must be chained (each id names its whole prefix)")
            child = child_of.get(parent)
            if child is None:
                child_of[parent] = block
            elif child != block:
                child_of[parent] = BRANCH
            parent = block
    position: dict[int, tuple[int, int]] = {}  # id -> (chain, blocks up to it)
    runs = []
    for row_ids in ids:
        row: list[list[int]] = []
        parent = -1
        for block in row_ids:
            place = position.get(block)
            if place is None:
                if child_of[parent] == BRANCH or parent == -1:
                    place = (block, 1)  # a chain is named by its first id
                else:
                    chain, depth = position[parent]
                    place = (chain, depth + 1)
                position[block] = place
            if row and row[-1][0] == place[0]:
                row[-1][1] = place[1]
            else:
                row.append([place[0], place[1]])
            parent = block
        runs.append(tuple((chain, blocks) for chain, blocks in row))
    return runs


def _split_top_level(body: str) -> list[str]:
    """`a=1,b=(x:y=1,z=2)` -> ['a=1', 'b=(x:y=1,z=2)']: commas inside parentheses stay."""
    items, depth, current = [], 0, []
    for char in body:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


@dataclass(frozen=True)
class SessionGenerator:
    """`sessions:...` (see the module doc). Token laws are drawn per turn (turns per
    session); think times are exponential."""

    turns: LengthDistribution
    system: int
    first: LengthDistribution
    growth: LengthDistribution
    output: LengthDistribution
    think_s: float
    spec: str

    def requests(self, count: int, arrivals: Arrivals, seed: int) -> SessionRequests:
        """`count` requests of whole sessions started at `arrivals`' times (the last
        session is cut at `count`)."""
        if arrivals.replays_trace:
            raise SpecError("generated sessions start at an arrival process's times; "
                            "--arrival trace replays a file")
        turn_rng, first_rng, growth_rng, output_rng, think_rng, arrival_rng = (
            np.random.default_rng(seed).spawn(6))
        turns = self.turns.sample(turn_rng, count)  # at most count sessions are needed
        sessions = int(np.searchsorted(np.cumsum(turns), count)) + 1
        turns = turns[:sessions]
        starts = arrivals.times(arrival_rng, sessions)
        first = self.first.sample(first_rng, sessions)
        growth = self.growth.sample(growth_rng, count)
        outputs = self.output.sample(output_rng, count)
        think = think_rng.exponential(self.think_s, count) if self.think_s > 0 else \
            np.zeros(count)
        inputs, session, previous, bound = (np.empty(count, np.int64) for _ in range(4))
        bound = np.empty(count)
        row = 0
        for s in range(sessions):
            context = self.system
            for t in range(int(turns[s])):
                if row == count:
                    break
                context += int(first[s]) if t == 0 else int(growth[row])
                inputs[row], session[row] = context, s
                previous[row] = row - 1 if t else -1
                bound[row] = starts[s] if t == 0 else bound[row - 1] + think[row]
                context += int(outputs[row])
                row += 1
        if inputs.max() > limits.BOUNDS["tokens"].maximum:
            raise SpecError(f"{self.spec}: a prompt reaches {inputs.max():,} tokens")
        sequence = np.lexsort((np.arange(count), bound))
        rank = np.empty(count, np.int64)
        rank[sequence] = np.arange(count)
        previous = np.where(previous >= 0, rank[np.maximum(previous, 0)], -1)[sequence]
        return SessionRequests(
            Requests(bound[sequence], inputs[sequence], outputs[sequence].astype(np.int64)),
            session=session[sequence], system_tokens=np.full(count, self.system, np.int64),
            previous=previous, think_s=np.where(previous >= 0, think[sequence], 0.0),
            name=self.spec)


def parse_generator(spec: str) -> SessionGenerator:
    """`sessions:turns=T,system=S,first=F,growth=G,output=O,think=X` (module doc)."""
    spec = str(spec).strip()
    kind, _, body = spec.partition(":")
    if kind.strip().lower() != "sessions":
        raise SpecError(f"bad session generator {spec!r}: expected sessions:...")
    values: dict[str, str] = {}
    for item in _split_top_level(body):
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or key not in GENERATOR_KEYS:
            raise SpecError(f"bad session generator {spec!r}: expected "
                            f"{', '.join(GENERATOR_KEYS)} as key=value, got {item!r}")
        values[key] = text.strip()
    missing = [key for key in GENERATOR_KEYS if key not in values]
    if missing:
        raise SpecError(f"bad session generator {spec!r}: missing {', '.join(missing)}")

    def law(key: str) -> LengthDistribution:
        text = values[key]
        if text.startswith("(") and text.endswith(")"):
            return parse_distribution(text[1:-1], "input_tokens")
        return parse_distribution(f"fixed:{text}", "input_tokens")

    system = values["system"]
    try:
        system_tokens = limits.check("tokens", float(system), f"bad session generator "
                                     f"{spec!r}", "system")
    except ValueError:
        raise SpecError(f"bad session generator {spec!r}: system must be a whole number of "
                        f"tokens, got {system!r}") from None
    try:
        think = float(values["think"])
    except ValueError:
        think = values["think"]
    think = limits.check("think_time_s", think, f"bad session generator {spec!r}", "think")
    return SessionGenerator(turns=law("turns"), system=int(system_tokens), first=law("first"),
                            growth=law("growth"), output=law("output"), think_s=think,
                            spec=spec)



GENERATOR_PREFIX = "sessions:"


def is_session_source(workload: str) -> bool:
    """A `sessions:` generator spec, or a session or hash-id trace file."""
    text = str(workload).strip()
    return text.lower().startswith(GENERATOR_PREFIX) or (
        text.lower().endswith(".csv") and is_session_trace(Path(text)))


def session_requests(source: str, arrivals: Arrivals, count: int, seed: int,
                     traces: dict[str, SessionRequests] | None = None) -> SessionRequests:
    """`count` requests of a session source: generated sessions started at `arrivals`'
    times, or a trace's first `count` rows replayed at `arrivals`' speed (`traces`: read
    files, kept between calls)."""
    text = str(source).strip()
    if text.lower().startswith(GENERATOR_PREFIX):
        return parse_generator(text).requests(count, arrivals, seed)
    if not arrivals.replays_trace:
        raise SpecError(f"{Path(text).name} is a session trace: it is replayed with "
                        "--arrival trace (its own times)")
    if traces is None or text not in traces:
        trace = read_session_trace(Path(text))
        if traces is None:
            return trace.head(count).scaled(arrivals.speed)
        traces[text] = trace
    return traces[text].head(count).scaled(arrivals.speed)
