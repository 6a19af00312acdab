"""Timing collectives inside a world of ranks: all_reduce, all_gather, reduce_scatter, broadcast.

Every rank runs the same calls in the same order (a collective that one rank skips hangs the others),
so every decision below is taken from values all ranks share: the configured sizes, and timings
reduced over the ranks before they are used.

For one (collective, S):

1. the rank's memory cap: a point whose buffers (``stats.collective_buffer_bytes``) exceed half
   of the memory free on the rank's device, shared by the ranks on that device, over all ranks the
   smallest, is ``skipped_memory``;
2. two untimed calls (connection setup, algorithm selection), then one timed call whose slowest rank
   gives the estimate;
3. blocks of ``calls`` back-to-back calls, each block started together (a one-element all_reduce and a
   device sync as a barrier) and timed from there to a device sync after its last call; a block's time
   per call is averaged over the ranks (nccl-tests' default, ``-a 1``); ``calls`` makes a block about
   ``min_run_time_s / 6`` long and at least 6 blocks (up to 50) fill ``min_run_time_s``;
4. median, IQR and the 95% interval of the median over the blocks (``measure.timing.summarize``),
   ``algbw``/``busbw`` from the median with nccl-tests' formulas (``stats``).

``torch.utils.benchmark`` is not used here, unlike the single-device stages: it picks its block size
from each process's own clock, so two ranks could run different numbers of calls and wait for each
other forever. The loop above is the same idea (blocks sized to hide the timer, statistics over
blocks) taken in lockstep.

The calls go through ``TorchCollectives`` (``torch.distributed``); tests drive the loop with a fake.
"""

from __future__ import annotations

import math
import timeit
from collections.abc import Callable

from ...measure.failures import failure_status, one_line
from ...measure.timing import MIN_BLOCKS, summarize
from .stats import algbw_gbps, busbw_factor, busbw_gbps, collective_buffer_bytes, collective_elements

MAX_BLOCKS = 50
MAX_CALLS = 10_000
WARMUP_CALLS = 2
DTYPE = "float32"


class TorchCollectives:
    """The four collectives on float32 buffers of one rank's device, through ``torch.distributed``."""

    def __init__(self, dist, torch, device: str, world_size: int, group=None, src: int = 0):
        """``group``: a sub-group of the world (None: the world), of ``world_size`` ranks; ``src``: the global rank
        broadcast sends from (the group's first)."""
        self.dist, self.torch, self.device, self.world = dist, torch, device, int(world_size)
        self.group, self.src = group, int(src)
        self._kw = {} if group is None else {"group": group}  # the world: the calls exactly as before sub-groups
        self._token = torch.zeros(1, device=device)
        # torch 2.13 renamed the tensor forms (all_gather_into_tensor -> all_gather_single); older images have only these
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self._reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def buffers(self, collective: str, count: int) -> tuple:
        """The tensors one call needs, ``count`` elements per rank chunk (the whole buffer for all_reduce and
        broadcast), filled so that nothing is measured while memory is first touched."""
        empty = lambda n: self.torch.ones(n, dtype=self.torch.float32, device=self.device)
        if collective == "all_gather":
            return empty(count * self.world), empty(count)
        if collective == "reduce_scatter":
            return empty(count), empty(count * self.world)
        return (empty(count),)

    def call(self, collective: str, buffers: tuple) -> None:
        if collective == "all_reduce":
            self.dist.all_reduce(buffers[0], **self._kw)
        elif collective == "all_gather":
            self._all_gather(buffers[0], buffers[1], **self._kw)
        elif collective == "reduce_scatter":
            self._reduce_scatter(buffers[0], buffers[1], **self._kw)
        elif collective == "broadcast":
            self.dist.broadcast(buffers[0], src=self.src, **self._kw)
        else:
            raise ValueError(f"collective: unknown {collective!r}")

    def barrier(self) -> None:
        """Every rank waits here for the others: a one-element all_reduce on the device."""
        self.dist.all_reduce(self._token, **self._kw)

    def reduce(self, value: float, op: str) -> float:
        """``value`` combined over the ranks: ``max``, ``min`` or ``mean``."""
        t = self.torch.tensor([float(value)], dtype=self.torch.float32, device=self.device)
        red = {"max": self.dist.ReduceOp.MAX, "min": self.dist.ReduceOp.MIN}.get(op, self.dist.ReduceOp.SUM)
        self.dist.all_reduce(t, op=red, **self._kw)
        out = float(t.item())
        return out / self.world if op == "mean" else out


def measure_collective(
    collective: str,
    size_bytes: int,
    *,
    ops,
    sync: Callable[[], None],
    world_size: int,
    cap_bytes: float,
    min_run_time_s: float,
    clock: Callable[[], float] = timeit.default_timer,
) -> dict:
    """One (collective, requested size) in this world: its row (without provenance); see the module doc.

    Failures are the row's status (``skipped_memory``, ``unsupported``, ``oom``, ``error``)."""
    count, size = collective_elements(collective, size_bytes, world_size)
    nan = math.nan
    row = {
        "collective": collective,
        "world_size": int(world_size),
        "size_bytes": size or int(size_bytes),
        "dtype": DTYPE,
        "median_s": nan,
        "iqr_s": nan,
        "ci95_low_s": nan,
        "ci95_high_s": nan,
        "algbw_gbps": nan,
        "busbw_gbps": nan,
        "busbw_factor": busbw_factor(collective, world_size),
        "repeats": 0,
        "blocks": 0,
        "calls_per_block": 0,
        "status": "ok",
        "status_detail": "",
    }
    if count == 0:
        row.update(status="unsupported", status_detail=f"{size_bytes} B is less than one {DTYPE} per rank")
        return row
    need = collective_buffer_bytes(collective, size, world_size)
    if need > cap_bytes:
        row.update(
            status="skipped_memory",
            status_detail=f"needs {need} B per rank; the cap is {int(cap_bytes)} B "
            "(half the free memory of the device, shared by its ranks)",
        )
        return row
    try:
        buffers = ops.buffers(collective, count)
        for _ in range(WARMUP_CALLS):
            ops.call(collective, buffers)
        sync()
        t0 = clock()
        ops.call(collective, buffers)
        sync()
        estimate = max(ops.reduce(clock() - t0, "max"), 1e-9)
        calls = int(min(MAX_CALLS, max(1, math.ceil(min_run_time_s / MIN_BLOCKS / estimate))))
        blocks = int(min(MAX_BLOCKS, max(MIN_BLOCKS, math.ceil(min_run_time_s / (calls * estimate)))))
        per_call = []
        for _ in range(blocks):
            ops.barrier()
            sync()
            t0 = clock()
            for _ in range(calls):
                ops.call(collective, buffers)
            sync()
            per_call.append(ops.reduce((clock() - t0) / calls, "mean"))
        del buffers
    except Exception as exc:  # an operation the backend lacks raises on every rank alike
        row.update(status=failure_status(exc), status_detail=one_line(exc))
        return row
    stats = summarize(per_call, calls)
    row.update(
        median_s=stats.median_s,
        iqr_s=stats.iqr_s,
        ci95_low_s=stats.ci95_low_s,
        ci95_high_s=stats.ci95_high_s,
        repeats=stats.repeats,
        blocks=stats.blocks,
        calls_per_block=calls,
        algbw_gbps=algbw_gbps(size, stats.median_s),
        busbw_gbps=busbw_gbps(collective, size, stats.median_s, world_size),
    )
    return row
