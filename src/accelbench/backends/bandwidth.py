"""Peak memory bandwidth of an accelerator: the ceiling the ``membw`` stage's measured GB/s is held against,
and the memory roof of the roofline when no bandwidth was measured.

Datasheet figures of the device memory (HBM, GDDR), in GB/s (10^9 bytes/s), per torch device. Each
entry carries its source: the vendor's page, the date it was read (with the search tool of the session
that added it), and a second public page that states the same figure. Matching works as in
``peaks.ChipPeak``: regular expressions on the lower-cased device name (or XLA device kind), specific
names first.

CPUs are not tabulated: their bandwidth depends on the DIMMs installed and the channels populated,
which the OS does not report reliably, so a CPU is **measured only** (``membw.peak_gbps.cpu`` in the
config sets a known figure). Pure data and functions: nothing here touches hardware; the figures are
datasheet numbers, **untested on hardware**.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

READ = "read 2026-12-01"
UNKNOWN = "not tabulated: set membw.peak_gbps in the config"


@dataclass(frozen=True)
class MemoryPeak:
    key: str
    patterns: tuple[str, ...]
    gbps: float
    source: str

    def matches(self, name: str) -> bool:
        low = name.lower()
        return any(re.search(p, low) for p in self.patterns)


MEMORY_PEAKS: tuple[MemoryPeak, ...] = (
    # --- NVIDIA ---------------------------------------------------------------------------------
    MemoryPeak(
        "H200 NVL",
        (r"\bh200\b.*\bnvl\b",),
        4800.0,
        f"https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL: 4.8 TB/s), {READ}",
    ),
    MemoryPeak(
        "H200 SXM",
        (r"\bh200\b",),
        4800.0,
        f"https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: 141 GB HBM3e, 4.8 TB/s), {READ}; "
        "same figure: https://openmetal.io/resources/blog/how-the-h200-is-built-for-memory-bound-ai-workloads/",
    ),
    MemoryPeak(
        "H100 NVL",
        (r"\bh100\b.*\bnvl\b",),
        3900.0,
        f"https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL: 94 GB HBM3, 3.9 TB/s), {READ}; "
        "same figure: AnandTech, 'NVIDIA Announces H100 NVL' (2023-03-21)",
    ),
    MemoryPeak(
        "H100 PCIe",
        (r"\bh100\b.*\bpcie\b",),
        2000.0,
        f"NVIDIA H100 datasheet (H100 PCIe: 80 GB HBM2e, 2 TB/s), {READ}; same figure: "
        "https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html (2,000 GB/sec)",
    ),
    MemoryPeak(
        "H100 SXM",
        (r"\bh100\b",),
        3350.0,
        f"https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM: 80 GB HBM3, 3.35 TB/s), {READ}; same "
        "figure: https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html (3,350 GB/sec); an H100 "
        "whose name says neither PCIe nor NVL is taken as SXM",
    ),
    MemoryPeak(
        "A100 80GB PCIe",
        (r"\ba100\b.*\b80\s?gb\b.*\bpcie\b", r"\ba100\b.*\bpcie\b.*\b80\s?gb\b"),
        1935.0,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        f"nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 80GB PCIe: 1,935 GB/s), {READ}; same "
        "figure: https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide",
    ),
    MemoryPeak(
        "A100 80GB SXM",
        (r"\ba100\b.*\b80\s?gb\b",),
        2039.0,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        f"nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 80GB SXM: 2,039 GB/s), {READ}; same "
        "figure: https://glennklockwood.com/garden/processors/A100",
    ),
    MemoryPeak(
        "A100 40GB",
        (r"\ba100\b",),
        1555.0,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        f"nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 40GB PCIe and SXM: 1,555 GB/s), {READ}; "
        "same figure: https://glennklockwood.com/garden/processors/A100; an A100 whose name does not "
        "say 80GB is taken as the 40GB part",
    ),
    # --- AMD Instinct -----------------------------------------------------------------------------
    MemoryPeak(
        "MI325X",
        (r"\bmi325x\b",),
        6000.0,
        f"https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html (256 GB HBM3E, 6 TB/s), "
        f"{READ}; same figure: https://aiwiki.ai/wiki/amd_instinct_mi325x",
    ),
    MemoryPeak(
        "MI300X",
        (r"\bmi300x\b",),
        5300.0,
        f"https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html (192 GB HBM3, 5.3 TB/s), "
        f"{READ}; same figure: https://aiwiki.ai/wiki/amd_instinct_mi300x",
    ),
    # --- Google TPU (XLA device kind), per chip ----------------------------------------------------
    MemoryPeak(
        "TPU v6e",
        (r"\btpu v6( lite|e)\b",),
        1638.0,
        f"https://docs.cloud.google.com/tpu/docs/v6e (HBM bandwidth per chip: 1638 GBps), {READ}",
    ),
    MemoryPeak(
        "TPU v5e",
        (r"\btpu v5( lite|e)\b",),
        819.0,
        f"https://docs.cloud.google.com/tpu/docs/v5e (HBM2 capacity and bandwidth: 16 GB, 819 GBps), {READ}",
    ),
)


def match_memory(name: str, table: tuple[MemoryPeak, ...] = MEMORY_PEAKS) -> MemoryPeak | None:
    if not name:
        return None
    return next((e for e in table if e.matches(name)), None)


def device_peak_gbps(info: dict) -> tuple[float | None, str]:
    """(GB/s, source) of the device ``info`` describes (``name`` or ``device_kind``), or (None, why)."""
    entry = match_memory(info.get("name") or "") or match_memory(info.get("device_kind") or "")
    if entry is None:
        return None, f"{info.get('name') or 'this device'}: {UNKNOWN}"
    return entry.gbps, f"{entry.key}: {entry.source}"
