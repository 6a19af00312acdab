"""Stage: host <-> device copy bandwidth, per accelerator device.

For every size in ``transfer.sizes_mb`` (MB = 10^6 bytes), both directions (``h2d``: host to
device, ``d2h``: device to host) and both kinds of host memory:

- ``pageable``: ordinary host memory; the driver stages it through a pinned bounce buffer, so it
  is what a plain ``tensor.to(device)`` gets.
- ``pinned``: page-locked memory (``Tensor.pin_memory()``), copied by DMA with
  ``non_blocking=True``: what a ``DataLoader(pin_memory=True)`` gets.

Each copy is timed with ``torch.utils.benchmark.Timer`` and the device's synced timer (so an
asynchronous pinned copy is counted until it has landed), at least 6 blocks, median and IQR;
``gbps`` = bytes / median / 10^9. The host buffer is written once before timing, so pageable
memory is not measured while it is still being faulted in.

Before its first copy each device is warmed in this process (``measure.stability.warm_device``),
recorded in ``device_warmup_*``. The CPU has no host<->device copy (the stage is accelerators-only):
its backend gets one ``absent`` row, as does a backend with no device here. A kind of memory the
backend cannot pin (``Backend.pinned_memory_support``: MPS, XLA) is ``unsupported`` with the reason.
CUDA, ROCm, MPS, XLA and XPU copies are **untested on hardware**; the loop, the statements and the
status logic are tested on the CPU with fakes.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import registry
from ...measure import samples as sample_table
from ...measure.failures import failure_status, one_line
from ...measure.timing import Measurer, TimingStats, is_unstable
from ...run.io import atomic_write_csv
from ..common import add_device_stage_arguments, start

DIRECTIONS = ("h2d", "d2h")
MEMORIES = ("pageable", "pinned")
TABLE = registry.TABLES["transfer"]
COLUMNS = TABLE.all_columns


def size_bytes(size_mb: float) -> int:
    """``transfer.sizes_mb`` entries are decimal megabytes (10^6 bytes), like the GB/s reported."""
    return max(1, int(round(size_mb * 1e6)))


def gbps(nbytes: int, median_s: float) -> float:
    return nbytes / median_s / 1e9


class TorchCopies:
    """Host and device buffers and the copy statements for one device (untested on hardware
    except the pageable path, which also runs between two CPU tensors)."""

    def __init__(self, device: str, backend):
        self.backend = backend
        self.torch = backend.torch
        self.device = device

    def host_buffer(self, nbytes: int, pinned: bool):
        if pinned and self.backend.pinned_memory_support():
            raise NotImplementedError(self.backend.pinned_memory_support())
        t = self.torch.empty(nbytes, dtype=self.torch.uint8)
        t.fill_(1)  # touch every page before timing
        return t.pin_memory() if pinned else t

    def device_buffer(self, nbytes: int):
        t = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        t.fill_(1)
        return t

    @staticmethod
    def statement(direction: str, pinned: bool) -> str:
        """``non_blocking`` only for pinned memory (pageable copies are synchronous anyway)."""
        nb = "True" if pinned else "False"
        return f"dev.copy_(host, non_blocking={nb})" if direction == "h2d" else f"host.copy_(dev, non_blocking={nb})"


def measure_copy(copies, measurer, *, direction: str, memory: str, nbytes: int, unstable_iqr_ratio: float) -> dict:
    """One (direction, memory, size): its row without provenance. Failures are the row's status."""
    backend = getattr(copies, "backend", None)
    nan = float("nan")
    row = {
        "direction": direction,
        "memory": memory,
        "size_bytes": nbytes,
        "median_s": nan,
        "iqr_s": nan,
        "ci95_low_s": nan,
        "ci95_high_s": nan,
        "ci_method": "",
        "lag1_autocorr": nan,
        "repeats": 0,
        "blocks": 0,
        "gbps": nan,
        "status": "ok",
        "status_detail": "",
    }
    pinned = memory == "pinned"
    try:
        try:
            host = copies.host_buffer(nbytes, pinned)
        except Exception as exc:
            if pinned and failure_status(exc, backend) != "oom":
                row.update(status="unsupported", status_detail=f"cannot pin host memory here: {one_line(exc)}")
                return row
            raise
        dev = copies.device_buffer(nbytes)
        stats: TimingStats = measurer.measure(copies.statement(direction, pinned), {"host": host, "dev": dev})
    except Exception as exc:
        row.update(status=failure_status(exc, backend), status_detail=one_line(exc))
        return row
    row.update(
        median_s=stats.median_s,
        iqr_s=stats.iqr_s,
        ci95_low_s=stats.ci95_low_s,
        ci95_high_s=stats.ci95_high_s,
        ci_method=stats.ci_method,
        lag1_autocorr=stats.lag1_autocorr,
        repeats=stats.repeats,
        blocks=stats.blocks,
        gbps=gbps(nbytes, stats.median_s),
    )
    row[sample_table.SAMPLES_KEY] = list(stats.samples_s)  # the samples file's, not a CSV column
    if is_unstable(stats.iqr_s, stats.median_s, unstable_iqr_ratio):
        row.update(status="unstable", status_detail=f"IQR/median {stats.iqr_ratio:.3f} > {unstable_iqr_ratio:g}")
    return row


def device_rows(device: str, transfer_cfg: dict, *, copies, measurer, log: Callable[[str], None] = print) -> list[dict]:
    """Every size x memory x direction on one device (rows without provenance)."""
    rows = []
    for size_mb in sorted(transfer_cfg["sizes_mb"]):
        nbytes = size_bytes(size_mb)
        for memory in MEMORIES:
            for direction in DIRECTIONS:
                row = measure_copy(
                    copies,
                    measurer,
                    direction=direction,
                    memory=memory,
                    nbytes=nbytes,
                    unstable_iqr_ratio=transfer_cfg["unstable_iqr_ratio"],
                )
                log(
                    f"transfer {device} {direction} {memory} {nbytes} B: {row['status']} "
                    f"{row['gbps']:.3g} GB/s {row['status_detail']}".rstrip()
                )
                rows.append(row)
    return rows


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("transfer", args.run_file, args.backend, threads=1)
    out = st.out_path(args.out_dir, "transfer")
    if not st.devices:
        atomic_write_csv(out, [st.absent_row()], columns=COLUMNS)
        st.write_samples(args.out_dir, sample_table.empty())
        print(f"transfer: {st.absent_reason}")
        return 0
    cfg = st.config["transfer"]
    rows = []
    for device in st.devices:
        base = st.device_row(device)
        try:
            copies = TorchCopies(device, st.backend)
            measurer = Measurer(st.backend.synced_timer(device), min_run_time_s=cfg["min_run_time_s"], threads=1)
            rows += [{**base, **r} for r in device_rows(device, cfg, copies=copies, measurer=measurer)]
        except Exception as exc:  # the device could not be set up at all: one row says why
            rows.append({**base, "status": "error", "status_detail": one_line(exc)})
    atomic_write_csv(out, rows, columns=COLUMNS)
    st.write_samples(args.out_dir, sample_table.from_block_rows("transfer", rows))
    return 0
