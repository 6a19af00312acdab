"""What the scaling stage computes from its measurements: pure functions (no torch, no processes, no I/O).

**Collective bandwidth**, with nccl-tests' definitions (NVIDIA/nccl-tests ``doc/PERFORMANCE.md``, last
changed in commit c6eb15875f508076f3f26de4f7da3899701bc4db, 2024-07-24; the ``*GetBw`` functions of
``src/all_reduce.cu``, ``all_gather.cu``, ``reduce_scatter.cu``, ``broadcast.cu`` at commit
a0b82b2260cf5152b9f8c061bbf7eaf0ba096432, 2026-07-09):

- ``S`` is the size of the operation in bytes: the buffer for all_reduce and broadcast, and the *whole*
  array (per-rank count x element size x n ranks) for all_gather (its output) and reduce_scatter (its input);
- ``algbw = S / t`` in GB/s (10^9 bytes/s), ``t`` the time of one operation;
- ``busbw = algbw x factor(n)``, the bandwidth the busiest link must carry, comparable with the hardware's
  link bandwidth whatever the number of ranks: all_reduce ``2(n-1)/n``, all_gather and reduce_scatter
  ``(n-1)/n``, broadcast ``1``. One rank moves nothing over a bus: the factor of all_reduce, all_gather and
  reduce_scatter is 0 there.

**Scaling efficiency** (weak scaling: a fixed batch per rank, so N ranks do N times the work of one):
``efficiency = throughput_N / (N x throughput_1)``, per seed from the same seed's trials, 1.0 when N ranks
are exactly N times as fast as one. Over seeds: the geometric mean and a Student-t 95% interval on the
log ratios (``amp_stats.speedup_ci``, the same paired statistics as the AMP speedup).

**The step time over seeds** (the summary): the unit of replication is the seed, a separate trial (its own
initial weights, its own batch order), not the step. The steps of one trial share its process, its weights and
its moment on the machine, so pooling the steps of every seed would treat thousands of correlated steps as
independent and give an interval far too narrow for what another trial would measure. Per seed the median step
time (of the slowest rank per step); over seeds the geometric mean of those medians with a Student-t 95%
interval on their logs (``seed_median_ci``): it covers the variance between seeds (trials) of one run, not
between runs (fresh stage processes on another day) nor between machines. With one seed there is no
between-seed spread: the summary then keeps that trial's distribution-free interval over its steps and says
``interval_over = descriptive`` (it covers step-to-step variation inside one trial only).

**Loss equivalence**: DDP with N ranks of batch B averages the gradients of N slices of one global batch of
N x B, which is the gradient of that global batch: a single process trained on the same global batches from
the same initial weights must give the same loss curve, up to floating-point summation order. The
largest relative difference over the first ``LOSS_CHECK_STEPS`` steps is compared with a tolerance per
precision (``LOSS_RTOL``; the reasons and the measurements behind both are given there).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ...measure.paired import speedup_ci
from ...measure.timing import median_ci95

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")

# The loss-curve comparison (DDP with N ranks against one process at the same global batch): the largest
# relative difference over the first LOSS_CHECK_STEPS steps, against LOSS_RTOL for the precision.
#
# Why a window: the two runs differ only in summation order (N partial gradient sums then an average,
# against one sum), and training amplifies such differences exponentially. Measured on this project's CPU
# (gloo, 2 ranks, the default mlp and transformer, 80 steps): float32 DDP stays within 2.4e-7 of the single
# process for 20 steps, then drifts to 3e-3 by step 80; bf16 AMP, whose products are rounded to 8 bits,
# reaches 3.5e-4 at step 10, 3.4e-3 at step 20 and 2.6e-2 at step 80. A real mistake shows at once: a rank
# that trains on its slice without synchronised gradients is 1.2e-2 to 1.6e-2 away after 5 steps and 1.9e-2
# to 7.6e-2 after 10 (the same seeds; tests/test_scaling.py plants it and a rank training on the wrong slice).
# Over the first 10 steps the tolerances below sit more than 1000x above the float32 drift and 25x above
# the bf16 drift, and at or below the smallest planted mistake. (Gradients *summed* instead of averaged are
# invisible to any loss check under Adam, which is invariant to a constant gradient scale.)
LOSS_CHECK_STEPS = 10
LOSS_RTOL = {"fp32": 1e-3, "amp": 1e-2}


def loss_tolerance(mode: str) -> float:
    """The relative tolerance for ``mode`` (``fp32``; every ``amp_*`` mode shares one)."""
    return LOSS_RTOL["amp"] if str(mode).startswith("amp") else LOSS_RTOL["fp32"]


def busbw_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``collective`` with ``world_size`` ranks (module doc)."""
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world_size: {world_size} is out of range; allowed: >= 1")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if collective == "broadcast":
        return 1.0
    raise ValueError(f"collective: unknown {collective!r}; allowed: {', '.join(COLLECTIVES)}")


def algbw_gbps(size_bytes: float, seconds: float) -> float:
    """``S / t`` in GB/s (10^9 bytes per second), as nccl-tests reports it."""
    return float(size_bytes) / float(seconds) / 1e9 if seconds > 0 else math.nan


def busbw_gbps(collective: str, size_bytes: float, seconds: float, world_size: int) -> float:
    return algbw_gbps(size_bytes, seconds) * busbw_factor(collective, world_size)


def collective_elements(collective: str, size_bytes: int, world_size: int, element_bytes: int = 4) -> tuple[int, int]:
    """(elements per rank buffer, the operation's size S in bytes) for a requested ``size_bytes``.

    all_reduce and broadcast move one buffer of S bytes; all_gather gathers, and reduce_scatter
    scatters, n per-rank chunks that make up S together, so S is rounded down to a multiple of n
    elements. (0, 0) when ``size_bytes`` is less than one element per rank."""
    n = int(world_size)
    if collective in ("all_gather", "reduce_scatter"):
        per_rank = int(size_bytes) // (element_bytes * n)
        return per_rank, per_rank * element_bytes * n
    count = int(size_bytes) // element_bytes
    return count, count * element_bytes


def collective_buffer_bytes(collective: str, size_bytes: int, world_size: int) -> int:
    """Bytes one rank allocates for a point: S (all_reduce and broadcast work in place), S + S/n for
    all_gather (input chunk and gathered output) and reduce_scatter (input and its chunk)."""
    if collective in ("all_gather", "reduce_scatter"):
        return int(size_bytes) + int(size_bytes) // int(world_size)
    return int(size_bytes)


def message_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """``min_bytes``, ``min_bytes * factor``, ... up to ``max_bytes`` (as nccl-tests' -b/-e/-f)."""
    if min_bytes < 1 or max_bytes < min_bytes or factor < 2:
        raise ValueError(
            f"scaling.sizes: min_bytes {min_bytes}, max_bytes {max_bytes}, factor {factor}: "
            "allowed: 1 <= min_bytes <= max_bytes, factor >= 2"
        )
    out, size = [], int(min_bytes)
    while size <= max_bytes:
        out.append(size)
        size *= int(factor)
    return out


def auto_world_sizes(max_world: int) -> list[int]:
    """1, 2, 4, ... up to ``max_world``, and ``max_world`` itself (8 GPUs: 1, 2, 4, 8; 6: 1, 2, 4, 6)."""
    out, n = [], 1
    while n <= max_world:
        out.append(n)
        n *= 2
    if max_world >= 1 and out[-1] != max_world:
        out.append(int(max_world))
    return out


def efficiency_ci(
    single_samples_per_s: Iterable[float], world_samples_per_s: Iterable[float], world_size: int, level: float = 0.95
) -> tuple[float, float, float]:
    """Scaling efficiency ``throughput_N / (N x throughput_1)`` over seed pairs: (geometric mean, CI low,
    CI high); the interval is NaN with fewer than two pairs."""
    single = np.asarray(list(single_samples_per_s), float)
    world = np.asarray(list(world_samples_per_s), float)
    if len(single) != len(world):
        raise ValueError("efficiency_ci: one world-size throughput per single-rank throughput (paired by seed)")
    if len(single) == 0:
        return math.nan, math.nan, math.nan
    return speedup_ci(world / float(world_size), single, level)


def loss_max_rel_diff(losses: Sequence[float], reference: Sequence[float], steps: int = LOSS_CHECK_STEPS) -> float:
    """Largest |loss - reference| / |reference| over the first ``steps`` steps both have; NaN when they share
    none, inf when a curve is not finite where the other is."""
    n = min(len(losses), len(reference), int(steps))
    if n == 0:
        return math.nan
    a = np.asarray(losses[:n], float)
    b = np.asarray(reference[:n], float)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.inf
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))


def loss_matches(rel_diff: float, tolerance: float) -> bool | None:
    """True within ``tolerance``, False beyond, None when there was nothing to compare."""
    if rel_diff is None or (isinstance(rel_diff, float) and math.isnan(rel_diff)):
        return None
    return bool(rel_diff <= tolerance)


def step_stats(step_s: Sequence[float]) -> tuple[float, float, float]:
    """Median step time and its distribution-free 95% interval (``measure.timing.median_ci95``)."""
    x = np.asarray([v for v in step_s if v == v], float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    low, high = median_ci95(x)
    return float(np.median(x)), low, high


def seed_median_ci(medians: Iterable[float], level: float = 0.95) -> tuple[float, float, float]:
    """Geometric mean of per-seed median step times and a Student-t ``level`` interval on their logs (the seed,
    one trial, is the unit of replication; module doc). The interval is NaN with fewer than two seeds; medians
    that are not finite and positive are left out."""
    x = np.asarray([v for v in medians if v is not None and v == v and math.isfinite(v) and v > 0], float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    logs = np.log(x)
    mean = float(logs.mean())
    if x.size < 2:
        return math.exp(mean), math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * logs.std(ddof=1) / math.sqrt(x.size))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


# interval_over: what a summary row's step-time interval covers (docs/scaling.md)
INTERVAL_SEEDS = "seeds"  # t-interval on log per-seed medians: the variance between seeds (trials)
INTERVAL_DESCRIPTIVE = "descriptive"  # 1 seed: its interval over its own steps; no between-trial spread


def _ratio(group: pd.DataFrame, column: str, over: str = "samples_per_s") -> float:
    """The median over a group's trials of ``column / over`` (a per-trial constant: tokens per sample, or MFU x
    step time), NaN where no trial has both."""
    if column not in group.columns or over not in group.columns:
        return math.nan
    a = pd.to_numeric(group[column], errors="coerce")
    b = pd.to_numeric(group[over], errors="coerce")
    r = (a / b)[np.isfinite(a / b)]
    return float(r.median()) if len(r) else math.nan


# statuses in the order that decides a summary row's status: the worst one of its trials
STATUS_ORDER = ("absent", "disabled", "unsupported", "timeout", "error", "oom", "nan", "ok")


def worst_status(statuses: Iterable[str]) -> str:
    seen = [str(s) for s in statuses]
    for s in STATUS_ORDER:
        if s in seen:
            return s
    return seen[0] if seen else "error"


SUMMARY_KEY = ["method", "workload", "mode", "world_size"]


def summarize(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, workload, mode, world_size) from the trials table.

    The median step and its interval are over seeds (``seed_median_ci`` on the trials' ``step_median_s``: the
    seed is the unit of replication, ``interval_over = seeds``); with one finished seed, that trial's own
    interval over its steps (``interval_over = descriptive``). ``samples_per_s`` is the global batch over that
    median, ``tokens_per_s`` / ``images_per_s`` the same in the workload's items (gpt, resnet), each also per rank
    (over ``world_size``); ``mfu_pct`` is one rank's MFU at the summary's median step. The efficiency pairs each
    seed with the DDP world-size-1 trial of the same workload, mode and seed (DataParallel included: the same
    single-device baseline); its interval is over those seed pairs too (it never pools steps).
    ``loss_matches_single`` is true only when every trial's check passed."""
    rows = []
    if trials.empty:
        return pd.DataFrame(rows)
    ok = trials[trials["status"] == "ok"]
    baseline = ok[(ok["method"] == "ddp") & (ok["world_size"] == 1)]
    for key, group in trials.groupby(SUMMARY_KEY, sort=False):
        method, workload, mode, world = key
        good = group[group["status"] == "ok"]
        medians = pd.to_numeric(good.get("step_median_s", pd.Series(dtype=float)), errors="coerce").dropna()
        median, low, high = seed_median_ci(medians)
        interval_over = INTERVAL_SEEDS if len(medians) >= 2 else INTERVAL_DESCRIPTIVE
        if len(medians) == 1:  # one seed: its own interval over its steps, labelled descriptive
            one = good.loc[medians.index[0]]
            low, high = float(one.get("step_ci95_low_s", math.nan)), float(one.get("step_ci95_high_s", math.nan))
        gb = group["global_batch"].dropna()
        global_batch = float(gb.iloc[0]) if len(gb) else math.nan
        base = baseline[(baseline["workload"] == workload) & (baseline["mode"] == mode)]
        pairs = good[["seed", "samples_per_s"]].merge(
            base[["seed", "samples_per_s"]], on="seed", suffixes=("", "_single")
        )
        eff, eff_low, eff_high = efficiency_ci(pairs["samples_per_s_single"], pairs["samples_per_s"], int(world))
        matches = [m for m in group["loss_matches_single"] if m is not None and m == m]
        diffs = group["loss_max_rel_diff"].dropna()
        details = [d for d in group.get("status_detail", pd.Series(dtype=str)).dropna().astype(str) if d]
        first = group.iloc[0]
        sps = global_batch / median if median > 0 else math.nan
        n = int(world)
        tokens = sps * _ratio(good, "tokens_per_s")
        images = sps * _ratio(good, "images_per_s")
        mfu = math.nan
        if "mfu_pct" in good.columns:  # MFU x step time is a trial's constant (its FLOPs over the peak)
            flops_over_peak = pd.to_numeric(good["mfu_pct"], errors="coerce") * medians.reindex(good.index)
            flops_over_peak = flops_over_peak[np.isfinite(flops_over_peak)]
            if len(flops_over_peak) and median > 0:
                mfu = float(flops_over_peak.median()) / median
        rows.append(
            {
                "method": method,
                "workload": workload,
                "mode": mode,
                "world_size": n,
                "devices": first["devices"],
                "process_group": first["process_group"],
                "threads_per_rank": first["threads_per_rank"],
                "trials": int(len(good)),
                "samples_per_s": sps,
                "step_median_s": median,
                "step_ci95_low_s": low,
                "step_ci95_high_s": high,
                "scaling_efficiency": eff,
                "efficiency_ci95_low": eff_low,
                "efficiency_ci95_high": eff_high,
                "loss_matches_single": (all(bool(m) for m in matches) if matches else None),
                "status": "ok" if len(good) == len(group) else worst_status(group["status"]),
                "global_batch": global_batch,
                "loss_max_rel_diff": float(diffs.max()) if len(diffs) else math.nan,
                "loss_tolerance": loss_tolerance(mode),
                "status_detail": details[0] if details else "",
                "interval_over": interval_over if len(medians) else "",
                "samples_per_s_per_rank": sps / n if n else math.nan,
                "tokens_per_s": tokens,
                "tokens_per_s_per_rank": tokens / n if n else math.nan,
                "images_per_s": images,
                "images_per_s_per_rank": images / n if n else math.nan,
                "mfu_pct": mfu,
            }
        )
    return pd.DataFrame(rows)
