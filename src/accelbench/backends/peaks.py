"""Theoretical peak TFLOP/s of a device for one dtype: the ceiling a matmul measurement is held against.

A measured rate above the peak means the measurement is wrong (a missing synchronization, a
cached result) or the peak is; so every peak here is meant as an *upper bound*, and every
figure carries a ``source`` string saying where it comes from and what it assumes.

- **GPUs** (CUDA, ROCm) and **TPUs** (XLA): vendor datasheet figures, *dense* (NVIDIA datasheets
  print tensor-core figures "with sparsity": those are halved here), at the boost clock, for one
  torch device. A device that reports fewer SMs/CUs than the table's full chip (a MIG slice, an
  MI300X in CPX mode, an RTX 4090 D) gets the figure scaled by the SM/CU ratio.
- **CPUs**: cores x clock x FLOPs per cycle per core for the ISA and dtype (see
  ``cpu_flops_per_cycle``). The clock is the max boost clock when the OS exposes it.
- A ``matmul.peak_tflops`` entry in the config ({backend: {dtype: TFLOP/s}}) wins over all of
  this, verbatim (for the CPU it is the figure for the whole device as benchmarked); that choice is
  made by ``Backend.peak_tflops``, which calls ``gpu_peak`` or ``cpu_peak`` here.

Pure functions: the device description comes in as a dict (``Backend.device_info``); nothing
here touches hardware. The GPU and TPU figures are untested on hardware (they are datasheet
numbers). The CPU model was checked on the development machine (AMD EPYC Zen 3 VM, AVX2+FMA,
2.445 GHz from /proc/cpuinfo): a one-thread 2048^3 fp32 matmul reached 65 GFLOP/s, 83% of the
model's 78 GFLOP/s per core.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

DTYPES = ("float32", "tf32", "bfloat16", "float16", "float8_e4m3fn")
UNKNOWN_DEVICE = "unknown device: set matmul.peak_tflops in the config"


# ---------------------------------------------------------------------------------------------
# GPU and TPU table
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipPeak:
    """Dense peak TFLOP/s of one accelerator model, per torch device.

    ``patterns`` are regular expressions searched in the lower-cased device name (or XLA device
    kind); the table is tried in order, so specific names (``h100 nvl``) come before general
    ones (``h100``). An AMD device whose name matches nothing (ROCm reports an empty or generic name
    where the driver's marketing-name table lacks the part) is matched by ``archs`` and CU count instead
    (``match_arch``). ``units`` is the number of SMs (NVIDIA) / CUs (AMD) one torch device of the
    full product has; ``None`` skips the SM/CU scaling. A ``None`` figure means the chip has no
    native unit for that dtype (see ``gpu_peak`` for what is used instead).
    """

    key: str
    patterns: tuple[str, ...]
    units: int | None
    tflops: dict[str, float | None]
    source: str
    note: str = ""
    kind: str = "gpu"  # "gpu" or "tpu"
    archs: tuple[str, ...] = ()  # AMD gcnArchName targets (gfx942): matched with the CU count when the name is not

    def matches(self, name: str) -> bool:
        low = name.lower()
        return any(re.search(p, low) for p in self.patterns)


def _t(float32, tf32, bfloat16, float16, float8_e4m3fn) -> dict[str, float | None]:
    return {"float32": float32, "tf32": tf32, "bfloat16": bfloat16, "float16": float16, "float8_e4m3fn": float8_e4m3fn}


_HOPPER_SXM = _t(66.9, 494.7, 989.4, 989.4, 1978.9)
_HOPPER_NVL = _t(60.0, 417.5, 835.5, 835.5, 1670.5)
_A100 = _t(19.5, 156.0, 312.0, 312.0, None)
_NV_HALVED = "tensor-core figures are the datasheet's 'with sparsity' values halved (dense)"

GPU_PEAKS: tuple[ChipPeak, ...] = (
    # --- NVIDIA Hopper --------------------------------------------------------------------
    ChipPeak(
        "H200 NVL",
        (r"\bh200\b.*\bnvl\b",),
        132,
        _HOPPER_NVL,
        "NVIDIA H200 NVL datasheet: FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341* TFLOPS (*sparse)",
        _NV_HALVED,
    ),
    ChipPeak(
        "H200 SXM",
        (r"\bh200\b",),
        132,
        _HOPPER_SXM,
        "NVIDIA H200 datasheet: same compute as H100 SXM: FP32 67, TF32 989*, BF16/FP16 1,979*, "
        "FP8 3,958* TFLOPS (*sparse); Hopper whitepaper dense: TF32 494.7, BF16 989.4, FP8 1978.9",
        _NV_HALVED,
    ),
    ChipPeak(
        "GH200",
        (r"\bgh200\b",),
        132,
        _HOPPER_SXM,
        "NVIDIA GH200 datasheet: the Hopper GPU of GH200 has H100 SXM compute "
        "(FP32 67, BF16 989.4, FP8 1978.9 TFLOPS dense)",
        _NV_HALVED,
    ),
    ChipPeak(
        "H100 NVL",
        (r"\bh100\b.*\bnvl\b",),
        132,
        _HOPPER_NVL,
        "NVIDIA H100 datasheet (H100 NVL column): FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341* TFLOPS (*sparse)",
        _NV_HALVED,
    ),
    ChipPeak(
        "H100 PCIe",
        (r"\bh100\b.*\bpcie\b",),
        114,
        _t(51.2, 378.0, 756.5, 756.5, 1513.0),
        "NVIDIA H100 datasheet (H100 PCIe column): FP32 51, TF32 756*, BF16/FP16 1,513*, "
        "FP8 3,026* TFLOPS (*sparse); Hopper whitepaper: FP32 51.2",
        _NV_HALVED,
    ),
    ChipPeak(
        "H100 SXM",
        (r"\bh100\b",),
        132,
        _HOPPER_SXM,
        "NVIDIA H100 datasheet (SXM) and Hopper whitepaper: FP32 66.9, TF32 494.7, BF16/FP16 989.4, "
        "FP8 1978.9 TFLOPS dense (989/1,979/3,958 with sparsity)",
        "an H100 whose name says neither PCIe nor NVL is taken as SXM (e.g. 'NVIDIA H100 80GB HBM3')",
    ),
    # --- NVIDIA Ampere / Ada / Volta ----------------------------------------------------------
    ChipPeak(
        "A100 PCIe",
        (r"\ba100\b.*\bpcie\b",),
        108,
        _A100,
        "NVIDIA A100 datasheet (PCIe 40/80GB): FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS dense; no FP8",
        "same peaks as A100 SXM (lower power limit, same boost clock)",
    ),
    ChipPeak(
        "A100 SXM",
        (r"\ba100\b",),
        108,
        _A100,
        "NVIDIA A100 datasheet (SXM4 40/80GB): FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS dense; no FP8",
    ),
    ChipPeak(
        "L40S",
        (r"\bl40s\b",),
        142,
        _t(91.6, 183.0, 362.05, 362.05, 733.0),
        "NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733 (1,466*) TFLOPS",
    ),
    ChipPeak(
        "L40",
        (r"\bl40\b",),
        142,
        _t(90.5, 90.5, 181.05, 181.05, 362.0),
        "NVIDIA L40 datasheet: FP32 90.5, TF32 90.5 (181*), BF16/FP16 181.05 (362.1*), FP8 362 (724*) TFLOPS",
    ),
    ChipPeak(
        "L4",
        (r"\bl4\b",),
        58,
        _t(30.3, 60.0, 121.0, 121.0, 242.5),
        "NVIDIA L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485* TFLOPS (*sparse)",
        _NV_HALVED,
    ),
    ChipPeak(
        "A10",
        (r"\ba10\b",),
        72,
        _t(31.2, 62.5, 125.0, 125.0, None),
        "NVIDIA A10 datasheet: FP32 31.2, TF32 62.5 (125*), BF16/FP16 125 (250*) TFLOPS; no FP8",
        "the A10G (AWS) is a different part and is not matched",
    ),
    ChipPeak(
        "RTX 4090",
        (r"\brtx 4090\b",),
        128,
        _t(82.6, 82.6, 165.2, 165.2, 330.3),
        "NVIDIA Ada Lovelace whitepaper, GeForce RTX 4090: FP32 82.6; tensor TF32 82.6, "
        "FP16/BF16 with FP32 accumulate 165.2, FP8 with FP32 accumulate 330.3 TFLOPS dense",
        "GeForce runs FP32-accumulate tensor ops at half the FP16-accumulate rate; PyTorch "
        "accumulates in FP32, so those are the figures used",
    ),
    ChipPeak(
        "V100S PCIe",
        (r"\bv100s\b",),
        80,
        _t(16.4, None, None, 130.0, None),
        "NVIDIA V100 datasheet (V100S PCIe): FP32 16.4, tensor FP16 130 TFLOPS; no TF32, BF16 or FP8",
    ),
    ChipPeak(
        "V100 PCIe",
        (r"\bv100\b.*\bpcie\b",),
        80,
        _t(14.0, None, None, 112.0, None),
        "NVIDIA V100 datasheet (PCIe): FP32 14, tensor FP16 112 TFLOPS; no TF32, BF16 or FP8",
    ),
    ChipPeak(
        "V100 SXM2",
        (r"\bv100\b.*\bsxm2\b",),
        80,
        _t(15.7, None, None, 125.0, None),
        "NVIDIA V100 datasheet (SXM2): FP32 15.7, tensor FP16 125 TFLOPS; no TF32, BF16 or FP8",
    ),
    ChipPeak(
        "V100 (other)",
        (r"\bv100\b",),
        80,
        _t(16.4, None, None, 130.0, None),
        "NVIDIA V100 datasheet: highest V100 figures (V100S: FP32 16.4, tensor FP16 130 TFLOPS)",
        "form factor not in the name (e.g. SXM3): the highest V100 figure is used as an upper bound",
    ),
    # --- AMD Instinct -------------------------------------------------------------------------
    # CDNA4 (gfx950, 256 CUs): no TF32 units (None: the fp32 rate bounds tf32), fp8 in the OCP e4m3fn encoding.
    ChipPeak(
        "MI355X",
        (r"\bmi355x\b",),
        256,
        _t(157.3, None, 2516.6, 2516.6, 5033.2),
        "AMD Instinct MI355X product page (https://www.amd.com/en/products/accelerators/instinct/mi350/"
        "mi355x.html, figures as quoted with their derivation in github.com/stas00/ml-engineering "
        "compute/accelerator/README.md, read 2026-12-01): FP32 157.3 TFLOPS, FP16/BF16 matrix 2.5 PFLOPS, "
        "OCP-FP8 5.0 PFLOPS dense (2x with structured sparsity); exact figures at the 2400 MHz peak engine "
        "clock x 256 CUs: FP16/BF16 4096 and FP8 8192 FLOP/clk/CU (1024 matrix cores x 512 FMA; AMD at "
        "ISSCC 2026: 8192 FP8 FLOP/clk/CU) = 2516.6 and 5033.2, FP32 256 FLOP/clk/CU = 157.3; 256 CUs and "
        "gfx950 from AMD's GPU specifications (https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html)",
        "CDNA4 has no TF32 (xf32) units; an MI350X/MI355X whose name is missing is taken as the faster MI355X",
        archs=("gfx950",),
    ),
    ChipPeak(
        "MI350X",
        (r"\bmi350x\b",),
        256,
        _t(144.2, None, 2306.9, 2306.9, 4613.7),
        "AMD Instinct MI350X: the MI355X's silicon (gfx950, 256 CUs) at a 2200 MHz peak engine clock "
        "(AMD at Hot Chips 2025, https://wccftech.com/amd-instinct-mi350-gpuai-hardware-powerhouse-3nm-3d-chiplet-"
        "cdna-4-185-billion-transistors-1400w-tbp-over-4000b-llm-support/; MI355X 2400 MHz) and 1000 W: the MI355X figures x 2200/2400 = FP32 144.2, "
        "FP16/BF16 2306.9, FP8 4613.7 TFLOPS dense (FP32 144.2 as in github.com/stas00/ml-engineering "
        "compute/accelerator/README.md, read 2026-12-01)",
        "CDNA4 has no TF32 (xf32) units",
        archs=("gfx950",),
    ),
    ChipPeak(
        "MI325X",
        (r"\bmi325x\b",),
        304,
        _t(163.4, 653.7, 1307.4, 1307.4, 2614.9),
        "AMD Instinct MI325X datasheet: same compute as MI300X (FP32 matrix 163.4, TF32 653.7, "
        "BF16/FP16 1307.4, FP8 2614.9 TFLOPS dense)",
        archs=("gfx942",),
    ),
    ChipPeak(
        "MI300X",
        (r"\bmi300x\b",),
        304,
        _t(163.4, 653.7, 1307.4, 1307.4, 2614.9),
        "AMD Instinct MI300X datasheet: FP32 (vector and matrix) 163.4, TF32 653.7, BF16/FP16 1307.4, "
        "FP8 2614.9 TFLOPS dense",
        "TF32 (xf32) is only used by PyTorch on ROCm when hipBLASLt is allowed to; "
        "a CPX-partitioned MI300X is scaled by its CU count",
        archs=("gfx942",),
    ),
    ChipPeak(
        "MI250X",
        (r"\bmi250x\b",),
        110,
        _t(47.85, None, 191.5, 191.5, None),
        "AMD Instinct MI250X datasheet: FP32 matrix 95.7, BF16/FP16 383.0 TFLOPS per package = "
        "two GCDs; PyTorch sees each GCD as one device, so half of each figure; no TF32 or FP8",
        "names like 'MI250X/MI250' are told apart by CU count (110 per MI250X GCD, 104 per MI250 GCD)",
        archs=("gfx90a",),
    ),
    ChipPeak(
        "MI250",
        (r"\bmi250\b",),
        104,
        _t(45.25, None, 181.05, 181.05, None),
        "AMD Instinct MI250 datasheet: FP32 matrix 90.5, BF16/FP16 362.1 TFLOPS per package = two GCDs; "
        "half of each per PyTorch device; no TF32 or FP8",
        archs=("gfx90a",),
    ),
    ChipPeak(
        "MI210",
        (r"\bmi210\b",),
        104,
        _t(45.3, None, 181.0, 181.0, None),
        "AMD Instinct MI210 datasheet: FP32 matrix 45.3, BF16/FP16 181.0 TFLOPS (one GCD); no TF32 or FP8",
        archs=("gfx90a",),
    ),
    # --- Intel Data Center GPU (XPU) ----------------------------------------------------------
    ChipPeak(
        "Max 1550",
        (r"\bmax 1550\b",),
        1024,
        _t(52.4, 419.4, 838.9, 838.9, None),
        "Intel Data Center GPU Max 1550 (ark.intel.com/content/www/us/en/ark/products/232873, read "
        "2026-12-01): 128 Xe cores = 1024 vector + 1024 XMX engines at 1.6 GHz max; FP32 vector "
        "1024 x 16 lanes x 2 FLOP x 1.6 GHz = 52.4, XMX BF16/FP16 1024 x 512 FLOP/clk x 1.6 GHz = 838.9, "
        "TF32 half of that = 419.4 TFLOPS (Intel's Xe HPC overview, ID 766085, 2024-04-08: 4096-bit XMX); no FP8",
        "units are execution units (torch.xpu max_compute_units); one stack of the two (FLAT mode) gets half",
    ),
    # --- Google TPU (XLA device kind) ---------------------------------------------------------
    ChipPeak(
        "TPU v6e",
        (r"\btpu v6( lite|e)\b",),
        None,
        _t(918.0, 918.0, 918.0, 918.0, None),
        "Google Cloud TPU v6e (Trillium) docs: 918 BF16 TFLOPS per chip",
        kind="tpu",
    ),
    ChipPeak(
        "TPU v5e",
        (r"\btpu v5( lite|e)\b",),
        None,
        _t(197.0, 197.0, 197.0, 197.0, None),
        "Google Cloud TPU v5e docs: 197 BF16 TFLOPS per chip",
        kind="tpu",
    ),
    ChipPeak(
        "TPU v5p",
        (r"\btpu v5p?\b",),
        None,
        _t(459.0, 459.0, 459.0, 459.0, None),
        "Google Cloud TPU v5p docs: 459 BF16 TFLOPS per chip",
        kind="tpu",
    ),
    ChipPeak(
        "TPU v4",
        (r"\btpu v4\b",),
        None,
        _t(275.0, 275.0, 275.0, 275.0, None),
        "Google Cloud TPU v4 docs: 275 BF16 TFLOPS per chip (one PyTorch/XLA device per chip)",
        kind="tpu",
    ),
)

_TPU_NOTE = (
    "TPUs multiply in bf16 on the MXU: float32 is measured at torch_xla's matmul precision 'highest' "
    "(six bf16 passes) and float16 is computed as bf16, so the bf16 figure bounds every dtype"
)


def match_chip(name: str, table: tuple[ChipPeak, ...] = GPU_PEAKS) -> ChipPeak | None:
    """The first table entry whose pattern matches ``name`` (a torch device name or XLA device kind)."""
    if not name:
        return None
    for entry in table:
        if entry.matches(name):
            return entry
    return None


def match_arch(arch: str | None, units, table: tuple[ChipPeak, ...] = GPU_PEAKS) -> tuple[ChipPeak | None, str]:
    """The entry for an AMD device known only by its architecture (``gfx942``) and CU count, and how it was chosen.

    Among the entries of that architecture: the first (the table puts the faster part first) whose full part
    has exactly ``units`` CUs; else the smallest full part with more CUs (a partition or a cut-down part, then
    scaled by ``gpu_peak``); else (CU count unknown or larger than any) the first, the fastest of them.
    """
    arch = str(arch or "").split(":")[0]
    candidates = [e for e in table if arch and arch in e.archs]
    if not candidates:
        return None, ""
    known = isinstance(units, int) and units > 0
    exact = [e for e in candidates if known and e.units == units]
    larger = [e for e in candidates if known and e.units and e.units > units]
    if exact:
        entry = exact[0]
    elif larger:
        entry = min(larger, key=lambda e: e.units)  # min keeps the first of equal sizes
    else:
        entry = candidates[0]
    alike = [e.key for e in candidates if e.units == entry.units]
    cus = f"{units} CUs" if known else "an unknown CU count"
    why = (
        f"device name not in the table: matched by architecture {arch} and {cus} to {entry.key} "
        f"({entry.units} CUs; {arch} parts of that size: {', '.join(alike)})"
    )
    return entry, why


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def gpu_peak(info: dict, dtype: str) -> tuple[float | None, str]:
    """Datasheet peak of the GPU/TPU described by ``info`` (``name`` or ``device_kind``, else an AMD
    ``gcn_arch_name`` with ``multiprocessors``; ``multiprocessors`` when known) for ``dtype``.

    A chip without a native unit for tf32/bf16/fp16 (V100 bf16, MI250X tf32) computes those at
    best at its fp32 rate, so that figure is used. A chip without fp8 gets None: there
    ``torch._scaled_mm`` refuses to run.
    """
    name = info.get("name") or ""
    entry = match_chip(name) or match_chip(info.get("device_kind") or "")
    matched_by = ""
    if entry is None:
        entry, matched_by = match_arch(info.get("gcn_arch_name"), info.get("multiprocessors"))
    if entry is None:
        return None, UNKNOWN_DEVICE
    figure = entry.tflops.get(dtype)
    basis = f"{entry.key}: {entry.source}"
    if matched_by:
        basis = f"{matched_by}; {basis}"
    if entry.note:
        basis += f"; {entry.note}"
    if entry.kind == "tpu":
        basis += f"; {_TPU_NOTE}"
    if figure is None:
        if dtype == "float8_e4m3fn":
            return None, f"{entry.key} has no native float8 matmul; {basis}"
        figure = entry.tflops.get("float32")
        if figure is None:
            return None, f"{entry.key}: no figure for {dtype}; {basis}"
        basis = f"no native {dtype} unit: at best the fp32 rate; {basis}"
    units = info.get("multiprocessors")
    if entry.units and isinstance(units, int) and 0 < units < entry.units:
        scaled = figure * units / entry.units
        return scaled, (
            f"{_fmt(figure)} TFLOP/s x {units}/{entry.units} SMs/CUs visible "
            f"(partition or cut-down part) = {_fmt(scaled)}; {basis}"
        )
    if entry.units and isinstance(units, int) and units > entry.units:
        basis += f"; note: device reports {units} SMs/CUs, the table's part has {entry.units}"
    return figure, basis


# ---------------------------------------------------------------------------------------------
# CPU model
# ---------------------------------------------------------------------------------------------

X86_FMA_NOTE = {
    "avx512_2fma": "AVX-512: 2 FMA units x 16 fp32 lanes x 2 FLOP = 64 FLOP/cycle "
    "(Skylake-SP and later Xeons, Zen 5 desktop/server; Xeon SKUs with one 512-bit FMA unit "
    "and mobile Zen 5 reach half, so there it is an upper bound)",
    "avx512_zen4": "AVX-512 on Zen 4 is double-pumped (512-bit ops issue as two 256-bit halves): "
    "2 x 8 fp32 lanes x 2 FLOP = 32 FLOP/cycle, the same as AVX2",
    "avx2_fma": "AVX2+FMA: 2 FMA units x 8 fp32 lanes x 2 FLOP = 32 FLOP/cycle (Haswell and later, Zen 2/3)",
    "avx2_zen1": "Zen/Zen+ split 256-bit FMAs into two 128-bit halves: 2 x 4 fp32 lanes x 2 FLOP = 16 FLOP/cycle",
    "avx": "AVX without FMA: one 8-wide add and one 8-wide multiply per cycle = 16 FLOP/cycle",
    "sse": "SSE only: one 4-wide add and one 4-wide multiply per cycle = 8 FLOP/cycle",
    "neon": "NEON/ASIMD: assumes 4 x 128-bit FMA pipes x 4 fp32 lanes x 2 FLOP = 32 FLOP/cycle "
    "(Neoverse V1/V2, Apple M P-cores; Neoverse N1/N2 and Cortex-A7x have 2 pipes, so this is an upper bound)",
    "sve512": "SVE with 512-bit vectors (A64FX): 2 FMA pipes x 16 fp32 lanes x 2 FLOP = 64 FLOP/cycle",
}

AMX_NOTE = (
    "Intel AMX: 1024 bf16/fp16 FLOP per cycle per core (Intel: a 4th Gen Xeon core performs "
    "'2048 INT8 or 1024 BF16 operations per cycle' with AMX)"
)


@dataclass
class CpuRate:
    flops_per_cycle: float | None
    basis: str
    notes: list[str] = field(default_factory=list)


def _flags(info: dict) -> set[str]:
    return {str(f).lower() for f in (info.get("flags") or [])}


def _int(value) -> int | None:
    try:
        if isinstance(value, str):
            return int(value, 0)
        return int(value)
    except (TypeError, ValueError):
        return None


def is_zen4(info: dict) -> bool:
    """AMD family 0x19 with AVX-512 is Zen 4 (Zen 3, the same family, has no AVX-512);
    model names 'EPYC 9xx4' / 'Ryzen ... 7xxx' catch it where the family is hidden."""
    vendor = str(info.get("vendor") or "")
    family = _int(info.get("family"))
    if "AMD" in vendor.upper() or "AMD" in str(info.get("model_name") or "").upper():
        if family == 0x19 and "avx512f" in _flags(info):
            return True
        name = str(info.get("model_name") or "")
        if re.search(r"EPYC\s+[489]\d\d4\b|Ryzen.*\b[78]\d\d\d", name) and "avx512f" in _flags(info):
            return True
    return False


def _fp32_rate(info: dict) -> CpuRate:
    flags = _flags(info)
    arch = str(info.get("arch") or "").lower()
    vendor = str(info.get("vendor") or "").upper()
    family = _int(info.get("family"))
    model = _int(info.get("model"))
    if arch in ("aarch64", "arm64") or "asimd" in flags or "neon" in flags:
        sve_bits = _int(info.get("sve_vector_bits"))
        if "sve" in flags and sve_bits and sve_bits >= 512:
            return CpuRate(64, X86_FMA_NOTE["sve512"])
        return CpuRate(32, X86_FMA_NOTE["neon"])
    if "avx512f" in flags:
        if is_zen4(info):
            return CpuRate(32, X86_FMA_NOTE["avx512_zen4"])
        return CpuRate(64, X86_FMA_NOTE["avx512_2fma"])
    if "avx2" in flags and "fma" in flags:
        if "AMD" in vendor and family == 0x17 and model is not None and model < 0x30:
            return CpuRate(16, X86_FMA_NOTE["avx2_zen1"])
        return CpuRate(32, X86_FMA_NOTE["avx2_fma"])
    if "avx" in flags:
        return CpuRate(16, X86_FMA_NOTE["avx"])
    if "sse2" in flags or "sse" in flags:
        return CpuRate(8, X86_FMA_NOTE["sse"])
    return CpuRate(None, "no SIMD flags known for this CPU")


def cpu_flops_per_cycle(info: dict, dtype: str) -> CpuRate:
    """FLOPs one core can retire per cycle for a ``dtype`` matmul, and why.

    - float32 (and tf32, which a CPU runs as float32): the FMA width x FMA units x 2.
    - bfloat16: AMX-BF16 1024 FLOP/cycle; else AVX512_BF16 ``vdpbf16ps`` (each fp32 lane
      takes two bf16 products per instruction): assumed to issue at the FMA rate, so 2x fp32;
      on ARM, ``bf16`` (BFMMLA: 16 MACs per 128-bit instruction) assumed at the FMA rate = 4x fp32,
      an upper bound; else no native bf16: converted to fp32 and bounded by the fp32 peak.
    - float16: AMX-FP16 1024; AVX512_FP16 (32 fp16 lanes) 2x fp32; ARM ``asimdhp`` 2x fp32; else
      conversion-bound at the fp32 peak.
    - float8_e4m3fn: no CPU multiplies fp8 natively; it is converted, so the best of the
      bf16/fp16/fp32 rates bounds it.
    """
    flags = _flags(info)
    fp32 = _fp32_rate(info)
    if fp32.flops_per_cycle is None:
        return fp32
    base = fp32.flops_per_cycle
    conv = "no native {d} arithmetic: converted to fp32, so conversion-bound at the fp32 peak ({b})"
    if dtype in ("float32",):
        return fp32
    if dtype == "tf32":
        return CpuRate(base, f"tf32 is a GPU tensor-core mode; on the CPU the matmul runs as float32 ({fp32.basis})")
    if dtype == "bfloat16":
        if "amx_bf16" in flags and "amx_tile" in flags:
            return CpuRate(1024, AMX_NOTE)
        if "avx512_bf16" in flags:
            return CpuRate(
                2 * base,
                "AVX512_BF16 vdpbf16ps: two bf16 products per fp32 lane, assumed at the "
                f"FMA issue rate = 2 x fp32 ({fp32.basis})",
            )
        if "bf16" in flags and (str(info.get("arch") or "").lower() in ("aarch64", "arm64") or "asimd" in flags):
            return CpuRate(
                4 * base,
                "ARM BF16 BFMMLA: 16 bf16 MACs per 128-bit instruction = 4 x FMLA's fp32 work, "
                f"assumed at the FMA issue rate (an upper bound) ({fp32.basis})",
            )
        return CpuRate(base, conv.format(d="bf16", b=fp32.basis))
    if dtype == "float16":
        if "amx_fp16" in flags and "amx_tile" in flags:
            return CpuRate(1024, AMX_NOTE + "; AMX-FP16 (Granite Rapids) runs fp16 at the bf16 rate")
        if "avx512_fp16" in flags:
            return CpuRate(2 * base, f"AVX512_FP16: 32 fp16 lanes per 512-bit FMA = 2 x fp32 ({fp32.basis})")
        if "asimdhp" in flags or "fphp" in flags:
            return CpuRate(2 * base, f"ARM FP16 (asimdhp): 8 fp16 lanes per 128-bit FMA = 2 x fp32 ({fp32.basis})")
        return CpuRate(base, conv.format(d="fp16", b=fp32.basis))
    if dtype == "float8_e4m3fn":
        best = max(
            (cpu_flops_per_cycle(info, d) for d in ("float32", "bfloat16", "float16")),
            key=lambda r: r.flops_per_cycle or 0,
        )
        return CpuRate(
            best.flops_per_cycle,
            "no CPU multiplies fp8 natively: it is converted, so the best of the "
            f"fp32/bf16/fp16 rates bounds it: {best.basis}",
        )
    return CpuRate(None, f"unknown dtype {dtype!r}")


def cpu_cores_used(info: dict, threads: int | None) -> tuple[int | None, str]:
    """Physical cores a ``threads``-thread matmul can keep busy: SMT siblings share the FMA units,
    so threads beyond the physical cores add nothing; a CPU affinity mask or cgroup quota caps it too."""
    physical = _int(info.get("cores_physical_available")) or _int(info.get("cores_physical"))
    caps = []
    if physical:
        caps.append((physical, f"{physical} physical cores available"))
    quota = info.get("cgroup_cpu_quota")
    if isinstance(quota, (int, float)) and quota > 0:
        caps.append((max(1, math.ceil(quota)), f"cgroup CPU quota {quota:g}"))
    if threads and threads > 0:
        caps.append((int(threads), f"{threads} threads"))
    if not caps:
        return None, "core count unknown"
    cores, why = min(caps, key=lambda c: c[0])
    return cores, why


def cpu_peak(info: dict, dtype: str, threads: int | None) -> tuple[float | None, str]:
    """cores used x clock (GHz) x FLOP/cycle/core, in TFLOP/s, and how it was computed."""
    rate = cpu_flops_per_cycle(info, dtype)
    if rate.flops_per_cycle is None:
        return None, f"cpu: {rate.basis}; set matmul.peak_tflops.cpu in the config"
    mhz = info.get("max_mhz")
    if not isinstance(mhz, (int, float)) or mhz <= 0:
        return (
            None,
            "cpu: clock unknown (no cpufreq, lscpu or /proc/cpuinfo clock); set matmul.peak_tflops.cpu in the config",
        )
    cores, why = cpu_cores_used(info, threads)
    if not cores:
        return None, "cpu: core count unknown; set matmul.peak_tflops.cpu in the config"
    ghz = mhz / 1000.0
    tflops = cores * ghz * rate.flops_per_cycle / 1000.0
    clock = info.get("clock_source") or "unknown clock source"
    bound = (
        "max boost clock, so an upper bound"
        if info.get("clock_is_max")
        else "not a max boost clock: turbo may run faster, so the peak may be exceeded"
    )
    return tflops, (
        f"cpu: {cores} cores ({why}) x {ghz:.3f} GHz x {_fmt(rate.flops_per_cycle)} FLOP/cycle/core "
        f"= {_fmt(tflops)} TFLOP/s; {rate.basis}; clock from {clock} ({bound})"
    )
