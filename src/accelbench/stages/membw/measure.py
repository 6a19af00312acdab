"""Stage: device-local memory bandwidth across sizes, and the launch-latency floor, per device.

Is a small matmul slow because of memory or because of launch overhead? This stage measures both, so
the roofline (``reporting.roofline``) places every matmul point against *measured* roofs.

- **Kernels** (STREAM's, on float32 arrays of one size, all three on the device):
  ``copy``: b = a (``b.copy_(a)``), 2 x size bytes per call; ``triad``: a = b + s * c
  (``torch.add(b, c, alpha=s, out=a)``), 3 x size bytes per call. Bytes are counted as STREAM counts
  them: each array read or written once, no write-allocate traffic.
- **Sizes** (bytes per array, ``plan_sizes``): from ``membw.min_kb`` (inside the caches) by factors of
  ``membw.size_factor`` up to ``membw.llc_factor`` times the last-level cache (``Backend.cache_bytes``:
  CPU L3, GPU L2, MI300 Infinity Cache), capped by ``membw.max_mb`` and by 40% of free memory for the
  three arrays; the cap itself is always measured. Small sizes show cache bandwidth, sizes past the
  cache the device memory's (DRAM, HBM). This VM's sysfs says its L3 is 480 MiB (the host's; the two
  vCPUs share one 32 MiB CCX), so the default cap (256 MiB) keeps the default run short; raise
  ``membw.max_mb`` to go several times past a real last-level cache.
- **Launch floor** (``kernel`` ``launch``): a tiny op (adding 1 to a one-element tensor) followed by a
  device synchronization, per call: the least time anything takes on this device from Python. The
  roofline calls a point ``launch_bound`` within a factor of it.
- **Statistics**: ``measure.timing.Measurer`` (torch.utils.benchmark with the backend's synced timer, at
  least 6 blocks, median with a within-run 95% interval: batch means from 50 blocks, else descriptive,
  ``measure.blocks``); ``gbps`` = bytes / median / 10^9 and its
  interval from the time's; ``unstable`` when IQR/median > ``membw.unstable_iqr_ratio``.
- **Peak**: ``Backend.peak_gbps`` (datasheet table ``backends.bandwidth``, or ``membw.peak_gbps``); a CPU
  is measured only. ``pct_of_peak`` where a peak is known.

Before measuring, each device is warmed in this process (``device_warmup_*``). A failure at one size
(OOM, error) is that row's status; the others go on. CUDA, ROCm, MPS, XLA and XPU paths are
**untested on hardware**: the statements and the logic are unit-tested on the CPU and with fakes.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable

from ... import registry
from ...measure import samples as sample_table
from ...measure.failures import failure_status, one_line
from ...measure.timing import Measurer, TimingStats, is_unstable
from ...run.io import atomic_write_csv
from ..common import add_device_stage_arguments, start
from . import KERNELS, LAUNCH

TABLE = registry.TABLES["membw"]
COLUMNS = TABLE.all_columns
ARRAYS = dict(zip(KERNELS, (2, 3)))  # arrays read or written per call (STREAM's byte count: copy 2, triad 3)
ELEMENT_BYTES = 4  # float32
MEMORY_FRACTION = 0.4  # the three arrays of the largest size within this share of free memory
TRIAD_SCALAR = 3.0


# ---- pure logic ---------------------------------------------------------------------------------


def plan_sizes(cache_bytes: int, free_bytes: int, cfg: dict) -> list[int]:
    """Bytes per array, ascending: ``min_kb`` KiB times powers of ``size_factor`` below the cap, then the cap:
    min(``llc_factor`` x ``cache_bytes``, ``max_mb`` MiB, ``MEMORY_FRACTION`` of free memory / 3), each a whole
    number of float32 elements."""
    lo = int(cfg["min_kb"]) * 1024
    cap = min(
        float(cfg["llc_factor"]) * cache_bytes,
        float(cfg["max_mb"]) * 1024**2,
        MEMORY_FRACTION * free_bytes / max(ARRAYS.values()),
    )
    cap = max(ELEMENT_BYTES, int(cap) // ELEMENT_BYTES * ELEMENT_BYTES)
    sizes, size = [], float(lo)
    while size < cap * 0.999:
        sizes.append(int(size) // ELEMENT_BYTES * ELEMENT_BYTES)
        size *= float(cfg["size_factor"])
    sizes.append(cap)
    return sorted({s for s in sizes if s > 0})


def bytes_moved(kernel: str, size_bytes: int) -> int:
    return ARRAYS[kernel] * size_bytes


def gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds and seconds > 0 else math.nan


def bandwidth_row(
    kernel: str, size_bytes: int, stats: TimingStats, unstable_iqr_ratio: float, peak_gbps: float | None
) -> dict:
    """The measured columns of one (kernel, size): GB/s from the median and its 95% interval."""
    moved = bytes_moved(kernel, size_bytes) if kernel in ARRAYS else math.nan
    rate = gbps(moved, stats.median_s)
    row = {
        "kernel": kernel,
        "size_bytes": size_bytes,
        "bytes_moved": moved,
        "median_s": stats.median_s,
        "iqr_s": stats.iqr_s,
        "ci95_low_s": stats.ci95_low_s,
        "ci95_high_s": stats.ci95_high_s,
        "ci_method": stats.ci_method,
        "lag1_autocorr": stats.lag1_autocorr,
        "repeats": stats.repeats,
        "blocks": stats.blocks,
        "gbps": rate,
        "gbps_ci95_low": gbps(moved, stats.ci95_high_s),
        "gbps_ci95_high": gbps(moved, stats.ci95_low_s),
        "pct_of_peak": 100 * rate / peak_gbps if peak_gbps and kernel in ARRAYS else math.nan,
        "status": "ok",
        "status_detail": "",
    }
    if is_unstable(stats.iqr_s, stats.median_s, unstable_iqr_ratio):
        row.update(status="unstable", status_detail=f"IQR/median {stats.iqr_ratio:.3f} > {unstable_iqr_ratio:g}")
    row[sample_table.SAMPLES_KEY] = list(stats.samples_s)  # the samples file's, not a CSV column
    return row


# ---- the device side ------------------------------------------------------------------------------


class TorchStreams:
    """The arrays and the timed statements of one device (device specifics from ``backend``: its
    synchronization and, for XLA, the graph cut after every op)."""

    def __init__(self, device: str, backend):
        self.backend = backend
        self.torch = backend.torch
        self.device = device
        self.cut = backend.graph_cut()
        self.arrays: dict = {}

    def allocate(self, size_bytes: int) -> None:
        """Three arrays of ``size_bytes``, every page written before timing (no first-touch faults timed)."""
        self.arrays = {}
        gc.collect()
        n = size_bytes // ELEMENT_BYTES
        t = self.torch
        self.arrays = {
            name: t.empty(n, dtype=t.float32, device=self.device).fill_(value)
            for name, value in (("a", 1.0), ("b", 2.0), ("c", 0.5))
        }

    def release(self) -> None:
        self.arrays = {}
        gc.collect()
        try:
            self.backend.empty_cache(self.device)
        except Exception:  # giving memory back is best effort
            pass

    def statement(self, kernel: str) -> tuple[str, dict]:
        if kernel == LAUNCH:
            x = self.torch.zeros(1, dtype=self.torch.float32, device=self.device)
            g = {"x": x, "sync": self.backend.synchronizer(self.device)}
            stmt = "x.add_(1)"
        elif kernel == "copy":
            g, stmt = dict(self.arrays), "b.copy_(a)"
        elif kernel == "triad":
            g, stmt = {**self.arrays, "add": self.torch.add, "s": TRIAD_SCALAR}, "add(b, c, alpha=s, out=a)"
        else:
            raise ValueError(f"membw kernel: unknown {kernel!r}; allowed: {', '.join((LAUNCH, *KERNELS))}")
        if self.cut is not None:  # XLA: cut the lazy graph after every op, or a block runs only the last one
            g["cut"] = self.cut
            stmt += "; cut()"
        if kernel == LAUNCH:
            stmt += "; sync()"  # every call waits for its op: the floor includes the round trip
        return stmt, g


def measure_kernel(
    streams, measurer, kernel: str, size_bytes: int, *, unstable_iqr_ratio: float, peak_gbps: float | None
) -> dict:
    """One (kernel, size) row without provenance; a failure is its status."""
    nan = math.nan
    row = {
        "kernel": kernel,
        "size_bytes": size_bytes,
        "bytes_moved": nan,
        "median_s": nan,
        "iqr_s": nan,
        "ci95_low_s": nan,
        "ci95_high_s": nan,
        "ci_method": "",
        "lag1_autocorr": nan,
        "repeats": 0,
        "blocks": 0,
        "gbps": nan,
        "gbps_ci95_low": nan,
        "gbps_ci95_high": nan,
        "pct_of_peak": nan,
        "status": "ok",
        "status_detail": "",
    }
    try:
        stmt, g = streams.statement(kernel)
        measurer.warm_up(stmt, g, calls=2)
        stats = measurer.measure(stmt, g)
    except Exception as exc:  # recorded as this row's status; the others go on
        row.update(status=failure_status(exc, getattr(streams, "backend", None)), status_detail=one_line(exc))
        return row
    return bandwidth_row(kernel, size_bytes, stats, unstable_iqr_ratio, peak_gbps)


def device_rows(
    device: str,
    cfg: dict,
    *,
    streams,
    measurer,
    cache_bytes: int,
    free_bytes: int,
    peak: tuple[float | None, str],
    log: Callable[[str], None] = print,
) -> list[dict]:
    """The launch floor, then every size x kernel on one device (rows without provenance)."""
    peak_gbps, peak_source = peak
    common = {"peak_gbps": peak_gbps if peak_gbps else math.nan, "peak_source": peak_source, "cache_bytes": cache_bytes}
    ratio = cfg["unstable_iqr_ratio"]
    rows = [
        {**measure_kernel(streams, measurer, LAUNCH, ELEMENT_BYTES, unstable_iqr_ratio=ratio, peak_gbps=None), **common}
    ]
    log(f"membw {device} launch floor: {rows[0]['status']} {rows[0]['median_s'] * 1e6:.3g} us per synchronized op")
    for size in plan_sizes(cache_bytes, free_bytes, cfg):
        try:
            streams.allocate(size)
        except Exception as exc:
            status, detail = failure_status(exc, getattr(streams, "backend", None)), one_line(exc)
            streams.release()
            for kernel in KERNELS:
                rows.append(
                    {
                        "kernel": kernel,
                        "size_bytes": size,
                        "bytes_moved": bytes_moved(kernel, size),
                        "repeats": 0,
                        "status": status,
                        "status_detail": detail,
                        **common,
                    }
                )
            log(f"membw {device} {size} B: {status} {detail}")
            continue
        for kernel in KERNELS:
            row = {
                **measure_kernel(streams, measurer, kernel, size, unstable_iqr_ratio=ratio, peak_gbps=peak_gbps),
                **common,
            }
            rows.append(row)
            log(
                f"membw {device} {kernel} {size} B: {row['status']} {row['gbps']:.4g} GB/s {row['status_detail']}".rstrip()
            )
        streams.release()
    return rows


# ---- the stage ----------------------------------------------------------------------------------


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("membw", args.run_file, args.backend, args.threads)
    out = st.out_path(args.out_dir, "membw")
    if not st.devices:
        atomic_write_csv(out, [st.absent_row()], columns=COLUMNS)
        st.write_samples(args.out_dir, sample_table.empty())
        print(f"membw: {st.absent_reason}")
        return 0
    cfg = st.config["membw"]
    rows = []
    for device in st.devices:
        base = {**st.device_row(device), "threads": st.threads}
        try:
            info = st.info(device)
            streams = TorchStreams(device, st.backend)
            measurer = Measurer(
                st.backend.synced_timer(device), min_run_time_s=cfg["min_run_time_s"], threads=st.threads
            )
            rows += [
                {**base, **r}
                for r in device_rows(
                    device,
                    cfg,
                    streams=streams,
                    measurer=measurer,
                    cache_bytes=int(st.backend.cache_bytes(device, info)),
                    free_bytes=int(st.backend.free_bytes(device)),
                    peak=st.backend.peak_gbps(info, cfg.get("peak_gbps") or {}),
                )
            ]
        except Exception as exc:  # the device could not be set up at all: one row says why
            rows.append(
                {**base, "kernel": LAUNCH, "status": failure_status(exc, st.backend), "status_detail": one_line(exc)}
            )
    atomic_write_csv(out, rows, columns=COLUMNS)
    st.write_samples(args.out_dir, sample_table.from_block_rows("membw", rows))
    return 0
