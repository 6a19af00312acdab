"""The roofline: every point a stage declares (``Table.roofline``: the matmul sweep, shapes and search, the AMP
training steps, the attention calls) placed by its arithmetic intensity against the device's *measured* memory
bandwidth and its peak compute, with a verdict. Pure functions of the aggregated tables (no torch), shared by
the plots and the report; what differs between stages lives in their ``roofline`` modules.

- **Arithmetic intensity** I = flops / bytes, the bytes being the least traffic the work needs. For a product
  (m x k) @ (k x n): 2mnk flops over the bytes of A, B and C, each moved once at the dtype's element size
  (``ELEMENT_BYTES``: fp8 operands give a bf16 result; ``gemm_bytes``); caches only reuse operands within it.
- **Roofs** per (run, device): the memory roof I x B, with B from the table declaring ``memory_roof`` (the
  memory-bandwidth stage: triad GB/s at the largest size measured, else copy, else the datasheet peak, the
  source said in ``bandwidth_source``); the compute roof from the tables declaring ``compute_roof``: the dtype's
  peak TFLOP/s (the rows' ``peak_tflops``), else the best TFLOP/s measured in that dtype.
  ``attainable_tflops`` = min(compute roof, I x B).
- **Verdict** (``classify``): ``launch_bound`` when the time per call is within ``LAUNCH_FACTOR`` of the
  device's launch floor (a tiny op, synchronized) times the kernels it launches; else ``memory_bound`` when I
  lies left of the ridge (compute roof / bandwidth), else ``compute_bound``; ``unknown`` without a bandwidth or
  a compute roof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .. import registry
from ..columns import TRUSTED

LAUNCH_FACTOR = 2.0  # within 2x of the launch floor: at least about half of the call is fixed overhead
VERDICTS = ("compute_bound", "memory_bound", "launch_bound", "unknown")
# (operand, result) bytes per element of a product in each dtype
ELEMENT_BYTES = {
    "float32": (4, 4),
    "tf32": (4, 4),
    "bfloat16": (2, 2),
    "float16": (2, 2),
    "float8_e4m3fn": (1, 2),
    "float64": (8, 8),
}


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _finite(x) -> bool:
    return math.isfinite(_num(x))


# ---- one product ------------------------------------------------------------------------------


def gemm_bytes(m: float, n: float, k: float, dtype: str) -> float:
    """Bytes of A (m x k), B (k x n) and C (m x n), each moved once."""
    operand, result = ELEMENT_BYTES.get(dtype, (4, 4))
    return (m * k + k * n) * operand + m * n * result


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP/byte."""
    return flops / nbytes if nbytes and nbytes > 0 else math.nan


def attainable_tflops(intensity_fpb: float, bandwidth_gbps: float, peak_tflops: float) -> float:
    """min(compute roof, memory roof at this intensity); the memory roof alone when no compute roof is known."""
    memory = intensity_fpb * bandwidth_gbps / 1e3 if _finite(bandwidth_gbps) else math.nan
    if not _finite(peak_tflops):
        return memory
    return min(peak_tflops, memory) if _finite(memory) else peak_tflops


def ridge(bandwidth_gbps: float, peak_tflops: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof."""
    if not (_finite(bandwidth_gbps) and bandwidth_gbps > 0 and _finite(peak_tflops)):
        return math.nan
    return peak_tflops * 1e3 / bandwidth_gbps


def classify(
    time_s: float,
    intensity_fpb: float,
    bandwidth_gbps: float,
    peak_tflops: float,
    launch_s: float,
    launches: int = 1,
    launch_factor: float = LAUNCH_FACTOR,
) -> str:
    """``launch_bound`` / ``memory_bound`` / ``compute_bound`` / ``unknown`` for one point (see the module)."""
    if _finite(time_s) and _finite(launch_s) and launch_s > 0 and time_s <= launch_factor * max(1, launches) * launch_s:
        return "launch_bound"
    r = ridge(bandwidth_gbps, peak_tflops)
    if not (_finite(r) and _finite(intensity_fpb)):
        return "unknown"
    return "memory_bound" if intensity_fpb < r else "compute_bound"


# ---- a layer's products (the plug-ins' step estimates use them) -------------------------------------


@dataclass(frozen=True)
class Gemm:
    """``count`` products (m x k) @ (k x n) (a batched product counts its batch)."""

    name: str
    m: int
    n: int
    k: int
    count: int = 1

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.count

    def bytes(self, dtype: str) -> float:
        return gemm_bytes(self.m, self.n, self.k, dtype) * self.count


def linear_gemms(name: str, rows: int, d_in: int, d_out: int, needs_input_grad: bool) -> list[Gemm]:
    """A Linear layer on ``rows`` inputs: forward, then the input gradient (unless its input needs none) and
    the weight gradient."""
    out = [Gemm(f"{name}", rows, d_out, d_in), Gemm(f"{name}.grad_w", d_out, d_in, rows)]
    if needs_input_grad:
        out.insert(1, Gemm(f"{name}.grad_x", rows, d_in, d_out))
    return out


# ---- the roofs of each device ---------------------------------------------------------------------


def roofline_tables() -> dict:
    """Every table that takes part in the roofline -> its ``Roofline`` declaration (registry order)."""
    return {name: t.roofline for name, t in registry.TABLES.items() if t.roofline is not None}


def markers() -> dict:
    """Each point kind -> (marker, legend label), from the declarations."""
    return {kind: m for r in roofline_tables().values() for kind, m in r.markers.items()}


def _compute_roofs(tables: dict) -> dict:
    """(run_id, device, dtype) -> (compute roof TFLOP/s, its source): a declared peak, else the best measured."""
    roofs: dict = {}
    frames = [tables.get(name) for name, r in roofline_tables().items() if r.compute_roof]
    frames = [f for f in frames if f is not None and not f.empty and "dtype" in f.columns]
    if not frames:
        return roofs
    df = pd.concat(
        [
            f[[c for c in ("run_id", "device", "dtype", "peak_tflops", "tflops", "status") if c in f.columns]]
            for f in frames
        ],
        ignore_index=True,
    )
    for key, g in df.groupby(["run_id", "device", "dtype"], sort=False):
        peaks = pd.to_numeric(g["peak_tflops"], errors="coerce").dropna()
        if len(peaks):
            roofs[key] = (float(peaks.iloc[0]), "peak")
            continue
        best = pd.to_numeric(g[g["status"].isin(TRUSTED)]["tflops"], errors="coerce").dropna()
        if len(best):
            roofs[key] = (float(best.max()), "best measured (no peak known)")
    return roofs


POINT_COLUMNS = [
    "run_id",
    "backend",
    "device",
    "device_name",
    "kind",
    "point",
    "dtype",
    "m",
    "n",
    "k",
    "flops",
    "bytes",
    "intensity",
    "time_s",
    "tflops",
    "compute_roof_tflops",
    "roof_source",
    "bandwidth_gbps",
    "bandwidth_source",
    "attainable_tflops",
    "pct_of_roof",
    "launch_s",
    "launches",
    "verdict",
]


def _point(p: dict, roofs: dict, devs: dict) -> dict:
    r, kind, point, dtype, launches = p, p["kind"], p["point"], p["dtype"], p.get("launches", 1)
    m, n, k, flops, nbytes, time_s = (p.get(c, math.nan) for c in ("m", "n", "k", "flops", "bytes", "time_s"))
    dev = devs.get((r["run_id"], r["device"]), {})
    compute, source = roofs.get((r["run_id"], r["device"], dtype), (math.nan, "none"))
    bw, launch = dev.get("bandwidth_gbps", math.nan), dev.get("launch_s", math.nan)
    i = intensity(flops, nbytes)
    tflops = flops / time_s / 1e12 if _finite(time_s) and time_s > 0 else math.nan
    roof = attainable_tflops(i, bw, compute)
    return {
        "run_id": r["run_id"],
        "backend": r.get("backend", ""),
        "device": r["device"],
        "device_name": r.get("device_name", ""),
        "kind": kind,
        "point": point,
        "dtype": dtype,
        "m": m,
        "n": n,
        "k": k,
        "flops": flops,
        "bytes": nbytes,
        "intensity": i,
        "time_s": time_s,
        "tflops": tflops,
        "compute_roof_tflops": compute,
        "roof_source": source,
        "bandwidth_gbps": bw,
        "bandwidth_source": dev.get("bandwidth_source", ""),
        "attainable_tflops": roof,
        "pct_of_roof": 100 * tflops / roof if _finite(roof) and roof > 0 else math.nan,
        "launch_s": launch,
        "launches": launches,
        "verdict": classify(time_s, i, bw, compute, launch, launches),
    }


def device_roofs(tables: dict) -> pd.DataFrame:
    """Per (run_id, device): the memory roof and the launch floor, from the tables that declare a memory roof."""
    frames = [r.memory_roof.load()(tables.get(name)) for name, r in roofline_tables().items() if r.memory_roof]
    frames = [f for f in frames if f is not None and not f.empty]
    return pd.concat(frames, ignore_index=True).drop_duplicates(["run_id", "device"]) if frames else pd.DataFrame()


def roofline_points(tables: dict) -> pd.DataFrame:
    """Every point the plug-ins place on the roofline (``Table.roofline.points``: the matmul sweep and shapes, the
    search's best, the AMP training steps, the attention kernels) with its intensity, roofs and verdict."""
    roofs = _compute_roofs(tables)
    devs = {(r["run_id"], r["device"]): r for r in device_roofs(tables).to_dict("records")}
    points = []
    for name, decl in roofline_tables().items():
        df = tables.get(name)
        if decl.points is None or df is None or df.empty:
            continue
        points += [_point(p, roofs, devs) for p in decl.points.load()(df, tables)]
    return pd.DataFrame(points, columns=POINT_COLUMNS)
