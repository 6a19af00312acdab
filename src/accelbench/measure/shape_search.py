"""Searching (m, n, k) for the highest matmul throughput within a time budget: pure logic, no torch.

A square sweep underestimates what a device can do (mamf-finder's H100 SXM bf16 best, 794.5 TFLOP/s,
is at 2048 x 2048 x 13312), and measuring every shape is too slow (an exhaustive search over 493,039
shapes took 2 days 14 h: stas00/ml-engineering PR #60). The search here measures a few percent of the
grid ``Space`` and reports the best shape it confirmed.

**Method: a coarse grid, then a multi-start compass search with step halving, then confirmation.**

1. *Coarse*: ``coarse_points`` values per axis, evenly spread over its range with both ends
   (``coarse_indices``): c^3 shapes, measured in ascending flops (so the time estimate of each next one
   builds on smaller, cheaper ones).
2. *Refine*: from each of the ``starts`` best coarse shapes, a compass (pattern) search on the grid:
   measure the 6 neighbours +-s along m, n and k; move to the best one if it beats the current shape;
   when none does, halve s (per axis, starting at half the coarse spacing); stop when no neighbour at
   one grid step is better. A shape is never measured twice.
3. *Confirm*: the ``confirm`` best shapes are measured again with the sweep's full measurement time;
   the best confirmed median wins and is reported with its 95% interval.

Why this method: throughput over (m, n, k) is piecewise smooth - it rises along each dimension until
the device is busy, with dips where tiles or waves of work quantize (a dimension just past a multiple
of the tile size wastes most of a tile) - so a coarse grid finds the region of the maximum and the
local search climbs the ridges between the quantization dips; several starts keep one start caught
behind a dip from deciding the result. It costs c^3 + starts x 6 x (halvings + moves) evaluations
instead of the whole grid. Successive halving on the time predictor was the alternative: it is
robust to noise, but its first rung must measure every shape of the grid once, which is what is too
slow. Confirmation removes the winner's curse: the largest of many short, noisy measurements is
biased high, and re-measuring the finalists with the full statistics gives an unbiased figure and an
interval.

**Budget**: before each measurement the caller's ``estimate_s`` says how long it will take; a
screening measurement starts only if it and the confirmation of the finalists (``confirm`` x the
estimate for the best shape so far) still fit in ``budget_s``; a confirmation only if it fits. The
search then stops (``stop_reason`` ``budget``) and reports what it confirmed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Triple = tuple[int, int, int]
METHOD = "coarse grid + multi-start compass search + confirmation"


@dataclass(frozen=True)
class Axis:
    """The values lo, lo + step, ..., up to hi of one dimension."""

    lo: int
    hi: int
    step: int

    @classmethod
    def from_config(cls, cfg: dict) -> Axis:
        return cls(int(cfg["min"]), int(cfg["max"]), int(cfg["step"]))

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(range(self.lo, self.hi + 1, self.step))

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Space:
    """The grid of (m, n, k) searched."""

    m: Axis
    n: Axis
    k: Axis

    @classmethod
    def from_config(cls, search_cfg: dict) -> Space:
        return cls(*(Axis.from_config(search_cfg[a]) for a in ("m", "n", "k")))

    @property
    def axes(self) -> tuple[Axis, Axis, Axis]:
        return self.m, self.n, self.k

    @property
    def size(self) -> int:
        return len(self.m) * len(self.n) * len(self.k)

    def shape(self, index: Triple) -> Triple:
        return tuple(axis.values[i] for axis, i in zip(self.axes, index))  # type: ignore[return-value]

    def largest(self) -> Triple:
        return self.m.values[-1], self.n.values[-1], self.k.values[-1]

    def all_indices(self):
        for i in range(len(self.m)):
            for j in range(len(self.n)):
                for h in range(len(self.k)):
                    yield i, j, h


def coarse_indices(length: int, points: int) -> list[int]:
    """``points`` indices evenly spread over 0 .. length - 1, both ends included (all when fewer)."""
    if length <= points:
        return list(range(length))
    return sorted({round(i * (length - 1) / (points - 1)) for i in range(points)})


@dataclass
class Evaluation:
    """One measurement of one shape: ``score`` is its TFLOP/s (NaN when it cannot be trusted), ``row``
    whatever the caller's ``evaluate`` returned with it."""

    shape: Triple
    phase: str  # coarse, refine, confirm
    score: float
    row: dict = field(default_factory=dict)
    order: int = 0

    @property
    def usable(self) -> bool:
        return isinstance(self.score, (int, float)) and math.isfinite(self.score)


@dataclass
class SearchResult:
    evaluations: list[Evaluation]
    best: Evaluation | None  # the best confirmed measurement (else the best screening one)
    grid_points: int
    evaluated_shapes: int  # distinct shapes measured
    stop_reason: str  # converged, budget, or the reason ``stop`` gave
    elapsed_s: float
    method: str = METHOD

    @property
    def share(self) -> float:
        """Distinct shapes measured / shapes in the grid."""
        return self.evaluated_shapes / self.grid_points if self.grid_points else math.nan


class _Stopped(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def search(
    space: Space,
    evaluate: Callable[[Triple, str], tuple[float, dict]],
    *,
    budget_s: float,
    estimate_s: Callable[[Triple, str], float] = lambda shape, phase: 0.0,
    clock: Callable[[], float] = time.monotonic,
    coarse_points: int = 5,
    starts: int = 3,
    confirm: int = 3,
    stop: Callable[[Evaluation], str | None] = lambda e: None,
) -> SearchResult:
    """Search ``space`` for the shape with the highest score (see the module's docstring).

    ``evaluate(shape, phase)`` measures one shape and returns (TFLOP/s or NaN, its row);
    ``estimate_s(shape, phase)`` predicts how long that takes; ``stop(evaluation)`` returns a reason
    to end the whole search (a dtype the device does not support) or None.
    """
    t0 = clock()
    deadline = t0 + float(budget_s)
    evaluations: list[Evaluation] = []
    screened: dict[Triple, Evaluation] = {}  # index -> its screening measurement
    unaffordable: set[Triple] = set()  # shapes left out because they no longer fit in the budget

    def best_screened() -> Evaluation | None:
        usable = [e for e in screened.values() if e.usable]
        return max(usable, key=lambda e: e.score) if usable else None

    def measure(index: Triple, phase: str) -> Evaluation | None:
        """The shape's screening measurement (measured now unless it was already); None when it no
        longer fits in the budget (then it counts as the worst shape, and smaller ones may still fit)."""
        if index in screened:
            return screened[index]
        if index in unaffordable:
            return None
        shape = space.shape(index)
        lead = best_screened()
        reserve = confirm * estimate_s(lead.shape, "confirm") if lead is not None else 0.0
        if clock() + estimate_s(shape, phase) + reserve > deadline:
            unaffordable.add(index)
            return None
        score, row = evaluate(shape, phase)
        e = Evaluation(shape, phase, float(score) if score is not None else math.nan, row, len(evaluations))
        evaluations.append(e)
        screened[index] = e
        reason = stop(e)
        if reason:
            raise _Stopped(reason)
        return e

    def score_of(index: Triple) -> float:
        e = screened.get(index)
        return e.score if e is not None and e.usable else -math.inf

    stop_reason = "converged"
    try:
        # 1. coarse grid, cheapest shapes first
        grid = [coarse_indices(len(a), coarse_points) for a in space.axes]
        coarse = [(i, j, h) for i in grid[0] for j in grid[1] for h in grid[2]]
        coarse.sort(key=lambda idx: math.prod(space.shape(idx)))
        for idx in coarse:
            measure(idx, "coarse")
        # 2. compass search from the best coarse shapes
        spacing = [max(1, math.ceil((len(a) - 1) / max(1, len(g) - 1) / 2)) for a, g in zip(space.axes, grid)]
        ranked = sorted((idx for idx in coarse if score_of(idx) > -math.inf), key=score_of, reverse=True)
        for start in ranked[:starts]:
            current, steps = start, list(spacing)
            while True:
                neighbours = []
                for axis in range(3):
                    for sign in (1, -1):
                        nb = list(current)
                        nb[axis] += sign * steps[axis]
                        if 0 <= nb[axis] < len(space.axes[axis]):
                            neighbours.append(tuple(nb))
                for nb in neighbours:
                    measure(nb, "refine")
                top = max(neighbours, key=score_of, default=None)
                if top is not None and score_of(top) > score_of(current):
                    current = top
                elif all(s == 1 for s in steps):
                    break
                else:
                    steps = [max(1, s // 2) for s in steps]
    except _Stopped as exc:
        stop_reason = exc.reason
    if unaffordable and stop_reason == "converged":
        stop_reason = "budget"

    # 3. confirmation of the finalists with the full measurement
    confirmed: list[Evaluation] = []
    if stop_reason in ("converged", "budget"):
        finalists = sorted((e for e in screened.values() if e.usable), key=lambda e: e.score, reverse=True)[:confirm]
        for f in finalists:
            if clock() + estimate_s(f.shape, "confirm") > deadline:
                stop_reason = "budget"
                break
            score, row = evaluate(f.shape, "confirm")
            e = Evaluation(f.shape, "confirm", float(score) if score is not None else math.nan, row, len(evaluations))
            evaluations.append(e)
            confirmed.append(e)
    usable_confirmed = [e for e in confirmed if e.usable]
    best = max(usable_confirmed, key=lambda e: e.score) if usable_confirmed else best_screened()
    return SearchResult(
        evaluations=evaluations,
        best=best,
        grid_points=space.size,
        evaluated_shapes=len(screened),
        stop_reason=stop_reason,
        elapsed_s=clock() - t0,
    )


def exhaustive(space: Space, evaluate: Callable[[Triple, str], tuple[float, dict]]) -> SearchResult:
    """Every shape of the grid once (the reference ``bench/search_quality.py`` compares the search with)."""
    evaluations = []
    for idx in space.all_indices():
        shape = space.shape(idx)
        score, row = evaluate(shape, "exhaustive")
        evaluations.append(Evaluation(shape, "exhaustive", float(score), row, len(evaluations)))
    usable = [e for e in evaluations if e.usable]
    return SearchResult(
        evaluations=evaluations,
        best=max(usable, key=lambda e: e.score) if usable else None,
        grid_points=space.size,
        evaluated_shapes=len(evaluations),
        stop_reason="exhaustive",
        elapsed_s=math.nan,
    )


@dataclass(frozen=True)
class QuantizedGemmModel:
    """A synthetic device with a known best shape: what the tests and ``bench/search_quality.py --fake`` search,
    free of measurement noise, to check the method itself.

    TFLOP/s = ``peak`` x tile efficiency (m and n padded up to multiples of ``tile``) x wave efficiency
    (the output tiles spread over ``units`` compute units, the last wave partly idle) x pipeline fill along k
    (k / (k + ``k_fill``), less ``k_penalty`` per 256 past ``k_best``, as when operands spill a cache) x
    occupancy (1 - exp(-mn / ``fill_mn``)) x 1.02 when n is a multiple of 256 (a layout bonus that makes the
    optimum unique). These are the effects that make real throughput jagged over (m, n, k); the best shape
    of a grid is known by evaluating all of it (``exhaustive``).
    """

    peak: float = 100.0
    units: int = 20
    tile: int = 128
    k_fill: int = 96
    k_best: int = 768
    k_penalty: float = 0.08
    fill_mn: float = 300_000.0

    def tflops(self, m: int, n: int, k: int) -> float:
        tm, tn = math.ceil(m / self.tile), math.ceil(n / self.tile)
        tile_eff = (m * n) / (tm * self.tile * tn * self.tile)
        tiles = tm * tn
        wave_eff = tiles / (math.ceil(tiles / self.units) * self.units)
        k_eff = k / (k + self.k_fill) * (1 - self.k_penalty * max(0, k - self.k_best) / 256)
        fill = 1 - math.exp(-(m * n) / self.fill_mn)
        layout = 1.02 if n % 256 == 0 else 1.0
        return self.peak * tile_eff * wave_eff * k_eff * fill * layout
