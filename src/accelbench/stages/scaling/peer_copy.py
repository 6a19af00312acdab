"""The device-to-device copy matrix (nvbandwidth's ``device_to_device_memcpy``, from PyTorch): GB/s of
copying one buffer from device i to device j, for every ordered pair i != j, in two ways:

- ``peer=on``: ``dst.copy_(src)``. Where the pair has peer access (``Backend.can_access_peer``; PyTorch
  enables it by itself for such pairs) the copy goes directly over NVLink/xGMI/PCIe. Where it has
  none, the row is ``unsupported``: the driver would stage the copy through the host, which is what
  ``peer=off`` measures;
- ``peer=off``: the copy staged through pinned host memory by hand (src -> host, then host -> dst), what a
  copy between GPUs costs without peer access (CUDA C Programming Guide, "Peer-to-Peer Memory Copy":
  without peer access such copies are staged through the host). PyTorch offers no switch to turn peer
  access off, so this is the honest stand-in.

Each copy is timed with ``torch.utils.benchmark`` (``measure.timing.Measurer``) and a timer that waits for
both devices; GB/s = bytes / median / 10^9. The size is ``scaling.sizes.max_bytes``, capped at a quarter of
the smaller free memory of the pair. A backend with fewer than two devices, or without a peer-copy path
(``Backend.peer_copy_support``), gets one ``unsupported`` row saying why. **Untested on hardware**: the
matrix logic is unit-tested with fakes, and the copy statements on CPU tensors.
"""

from __future__ import annotations

import math
import timeit
from collections.abc import Callable

from ...measure.failures import failure_status, one_line
from ...measure.timing import Measurer

PEER_MODES = ("on", "off")


class TorchPeerCopies:
    """Buffers and statements for copies from ``src`` to ``dst`` (and the host buffer of the staged copy)."""

    def __init__(self, backend, src: str, dst: str, nbytes: int):
        torch = backend.torch
        self.backend = backend
        self.src = torch.ones(nbytes, dtype=torch.uint8, device=src)
        self.dst = torch.zeros(nbytes, dtype=torch.uint8, device=dst)
        self.host = None
        self.src_name, self.dst_name = src, dst

    def globals_(self, peer: str) -> dict:
        if peer == "off" and self.host is None:
            host = self.backend.torch.empty(self.src.numel(), dtype=self.backend.torch.uint8)
            self.host = host.pin_memory() if self.backend.pinned_memory_support() is None else host
        return {
            "src": self.src,
            "dst": self.dst,
            "host": self.host,
            "wait_dst": self.backend.synchronizer(self.dst_name),
        }

    @staticmethod
    def statement(peer: str) -> str:
        """Direct, or staged. Staged: the device-to-host copy is synchronous, so the host-to-device copy
        that follows on the other device's stream reads finished data; that copy is asynchronous, so the
        statement waits for it (``wait_dst``) before it ends: timeit runs the statement back to back, and
        the next device-to-host copy would otherwise overwrite the pinned buffer while the previous
        host-to-device copy still reads it (a race, and GB/s inflated by the overlap)."""
        return "dst.copy_(src)" if peer == "on" else "host.copy_(src); dst.copy_(host, non_blocking=True); wait_dst()"


def both_synced_timer(backend, src: str, dst: str) -> Callable[[], float]:
    """A clock read only after both devices finished their queued work."""
    sync_src, sync_dst = backend.synchronizer(src), backend.synchronizer(dst)

    def _timer() -> float:
        sync_src()
        sync_dst()
        return timeit.default_timer()

    return _timer


def copy_size(backend, src: str, dst: str, max_bytes: int) -> int:
    """``max_bytes``, at most a quarter of the smaller free memory of the two devices."""
    free = min(backend.free_bytes(src), backend.free_bytes(dst))
    return int(max(1, min(int(max_bytes), free // 4)))


def matrix_rows(
    backend,
    devices: list[str],
    max_bytes: int,
    *,
    min_run_time_s: float,
    copies_factory=TorchPeerCopies,
    measurer_factory=None,
    log=print,
) -> list[dict]:
    """Every ordered pair x peer mode (rows without provenance), or one ``unsupported`` row."""
    nan = math.nan
    why = backend.peer_copy_support(len(devices))
    if why:
        return [
            {
                "src": devices[0] if devices else "",
                "dst": "",
                "peer": "",
                "size_bytes": nan,
                "median_s": nan,
                "gbps": nan,
                "status": "unsupported",
                "status_detail": why,
            }
        ]
    if measurer_factory is None:

        def measurer_factory(src, dst):
            return Measurer(both_synced_timer(backend, src, dst), min_run_time_s=min_run_time_s, threads=1)

    rows = []
    for src in devices:
        for dst in devices:
            if src == dst:
                continue
            base = {
                "src": src,
                "dst": dst,
                "size_bytes": nan,
                "median_s": nan,
                "ci95_low_s": nan,
                "ci95_high_s": nan,
                "repeats": 0,
                "gbps": nan,
                "status": "ok",
                "status_detail": "",
            }
            try:
                nbytes = copy_size(backend, src, dst, max_bytes)
                copies = copies_factory(backend, src, dst, nbytes)
                measurer = measurer_factory(src, dst)
            except Exception as exc:  # the pair could not be set up: both of its rows say why
                rows += [
                    {**base, "peer": peer, "status": failure_status(exc, backend), "status_detail": one_line(exc)}
                    for peer in PEER_MODES
                ]
                continue
            for peer in PEER_MODES:
                row = {**base, "peer": peer, "size_bytes": nbytes}
                if peer == "on" and not backend.can_access_peer(src, dst):
                    row.update(
                        status="unsupported",
                        status_detail=f"no peer access from {src} to {dst}: the driver "
                        "stages such a copy through the host (see peer=off)",
                    )
                else:
                    try:
                        stats = measurer.measure(copies.statement(peer), copies.globals_(peer))
                        row.update(
                            median_s=stats.median_s,
                            ci95_low_s=stats.ci95_low_s,
                            ci95_high_s=stats.ci95_high_s,
                            repeats=stats.repeats,
                            gbps=nbytes / stats.median_s / 1e9 if stats.median_s > 0 else nan,
                        )
                    except Exception as exc:
                        row.update(status=failure_status(exc, backend), status_detail=one_line(exc))
                log(f"peer copy {src} -> {dst} peer={peer}: {row['status']} {row['gbps']:.3g} GB/s")
                rows.append(row)
    return rows
