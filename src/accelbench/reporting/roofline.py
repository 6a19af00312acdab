"""The roofline: every measured matmul (sweep, shapes, search) and every AMP training step placed by its
arithmetic intensity against the device's *measured* memory bandwidth and its peak compute, with a
verdict. Pure functions of the aggregated tables (no torch), shared by the plots and the report.

- **Arithmetic intensity** I = flops / bytes. For a product (m x k) @ (k x n): 2mnk flops over the
  bytes of A, B and C, each moved once at the dtype's element size (``ELEMENT_BYTES``: fp8 operands
  give a bf16 result). That is the least traffic the product needs (``gemm_bytes``); caches only
  reuse operands within it.
- **Roofs** per (run, device): the memory roof I x B, with B the ``membw`` triad GB/s at the largest
  size measured (device memory rather than a cache; else copy; else the datasheet peak, the source
  said in ``bandwidth_source``); the compute roof: the dtype's peak TFLOP/s (the rows' ``peak_tflops``),
  else the best TFLOP/s measured in that dtype. ``attainable_tflops`` = min(compute roof, I x B).
- **Verdict** (``classify``): ``launch_bound`` when the time per call is within ``LAUNCH_FACTOR`` of the
  device's launch floor (the ``membw`` ``launch`` row: a tiny op, synchronized) times the kernels it
  launches; else ``memory_bound`` when I lies left of the ridge (compute roof / bandwidth), else
  ``compute_bound``; ``unknown`` without a bandwidth or a compute roof.
- **AMP workloads** (``step_gemms``): the intensity of a training step is *estimated from the model's
  GEMMs*, read from the run's config: every Linear layer's product (batch x in) @ (in x out) forward,
  and backward the input gradient (batch x out) @ (out x in) and the weight gradient (out x batch) @
  (batch x in) (the first layer has no input gradient: its input needs none); for the transformer also
  attention's two batched products per (example, head), S x dh @ dh x S and S x S @ S x dh, and
  their four backward products. Element size: 2 bytes in AMP modes (autocast runs the products in
  bf16/fp16), 4 in fp32/tf32. Elementwise ops, normalization, the optimizer and the casts autocast
  adds are not counted, so the real traffic is higher (the real intensity lower) than estimated, and
  the achieved TFLOP/s (GEMM flops / step time) is a lower bound of the work done. The GEMM count is
  the step's ``launches``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd

from ..columns import TRUSTED
from ..stages.membw import KERNELS, LAUNCH

LAUNCH_FACTOR = 2.0  # within 2x of the launch floor: at least about half of the call is fixed overhead
VERDICTS = ("compute_bound", "memory_bound", "launch_bound", "unknown")
# (operand, result) bytes per element of a product in each dtype
ELEMENT_BYTES = {"float32": (4, 4), "tf32": (4, 4), "bfloat16": (2, 2), "float16": (2, 2),
                 "float8_e4m3fn": (1, 2), "float64": (8, 8)}
MODE_DTYPE = {"fp32": "float32", "tf32": "tf32", "amp_bf16": "bfloat16", "amp_fp16": "float16"}


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


def classify(time_s: float, intensity_fpb: float, bandwidth_gbps: float, peak_tflops: float, launch_s: float,
             launches: int = 1, launch_factor: float = LAUNCH_FACTOR) -> str:
    """``launch_bound`` / ``memory_bound`` / ``compute_bound`` / ``unknown`` for one point (see the module)."""
    if _finite(time_s) and _finite(launch_s) and launch_s > 0 and time_s <= launch_factor * max(1, launches) * launch_s:
        return "launch_bound"
    r = ridge(bandwidth_gbps, peak_tflops)
    if not (_finite(r) and _finite(intensity_fpb)):
        return "unknown"
    return "memory_bound" if intensity_fpb < r else "compute_bound"


# ---- AMP workloads: the model's GEMMs ------------------------------------------------------------

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


def _linear(name: str, rows: int, d_in: int, d_out: int, needs_input_grad: bool) -> list[Gemm]:
    """A Linear layer on ``rows`` inputs: forward, then the input gradient (unless its input needs none) and
    the weight gradient."""
    out = [Gemm(f"{name}", rows, d_out, d_in),
           Gemm(f"{name}.grad_w", d_out, d_in, rows)]
    if needs_input_grad:
        out.insert(1, Gemm(f"{name}.grad_x", rows, d_in, d_out))
    return out


def step_gemms(workload: str, amp_cfg: dict) -> list[Gemm]:
    """Every matrix product of one training step (forward and backward) of an AMP workload, from the config
    (``stages.amp`` builds the models: ``build_mlp``, ``build_transformer``)."""
    d = amp_cfg["data"]
    batch = int(amp_cfg["batch_size"])
    if workload == "mlp":
        c = amp_cfg["mlp"]
        dims = [d["n_features"]] + [c["hidden"]] * c["layers"] + [d["n_classes"]]
        gemms = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            gemms += _linear(f"linear{i}", batch, a, b, needs_input_grad=i > 0)
        return gemms
    if workload == "transformer":
        c = amp_cfg["transformer"]
        s, dm, ff, heads = c["seq_len"], c["d_model"], c["ff"], c["n_heads"]
        tokens, dh = batch * s, dm // heads
        gemms = _linear("embed", tokens, d["n_features"], dm, needs_input_grad=False)
        for layer in range(c["layers"]):
            p = f"layer{layer}"
            gemms += _linear(f"{p}.qkv", tokens, dm, 3 * dm, True)
            bh = batch * heads
            gemms += [Gemm(f"{p}.scores", s, s, dh, bh), Gemm(f"{p}.context", s, dh, s, bh),
                      Gemm(f"{p}.scores.grad", s, s, dh, bh), Gemm(f"{p}.context.grad_v", s, dh, s, bh),
                      Gemm(f"{p}.scores.grad_q", s, dh, s, bh), Gemm(f"{p}.scores.grad_k", s, dh, s, bh)]
            gemms += _linear(f"{p}.out", tokens, dm, dm, True)
            gemms += _linear(f"{p}.ff_up", tokens, dm, ff, True)
            gemms += _linear(f"{p}.ff_down", tokens, ff, dm, True)
        gemms += _linear("head", batch, dm, d["n_classes"], True)
        return gemms
    raise ValueError(f"amp.workloads: unknown {workload!r}; allowed: mlp, transformer")


def step_flops_bytes(workload: str, amp_cfg: dict, dtype: str) -> tuple[float, float, int]:
    """(GEMM flops, GEMM bytes, GEMM launches) of one training step."""
    gemms = step_gemms(workload, amp_cfg)
    return float(sum(g.flops for g in gemms)), float(sum(g.bytes(dtype) for g in gemms)), len(gemms)


# ---- the roofs of each device ---------------------------------------------------------------------

def device_roofs(membw: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, device): ``bandwidth_gbps`` (triad at the largest size measured, else copy, else the
    datasheet peak), ``bandwidth_source``, ``bandwidth_size_bytes``, ``beyond_cache`` (the size exceeded
    the last-level cache), ``peak_gbps`` and ``launch_s``."""
    cols = ["run_id", "device", "bandwidth_gbps", "bandwidth_source", "bandwidth_size_bytes", "beyond_cache",
            "peak_gbps", "launch_s"]
    if membw is None or membw.empty or "kernel" not in membw.columns:
        return pd.DataFrame(columns=cols)
    df = membw[membw["status"].isin(TRUSTED)]
    out = []
    for (run_id, device), g in membw.groupby(["run_id", "device"], sort=True):
        ok = df[(df["run_id"] == run_id) & (df["device"] == device)]
        launch = ok[ok["kernel"] == LAUNCH]["median_s"]
        peak = _num(g["peak_gbps"].dropna().iloc[0]) if g["peak_gbps"].notna().any() else math.nan
        row = {"run_id": run_id, "device": device, "peak_gbps": peak,
               "launch_s": float(launch.iloc[0]) if len(launch) else math.nan,
               "bandwidth_gbps": math.nan, "bandwidth_source": "", "bandwidth_size_bytes": math.nan,
               "beyond_cache": False}
        for kernel in reversed(KERNELS):  # triad first (reads two arrays, writes one: as most kernels), then copy
            k = ok[(ok["kernel"] == kernel) & (ok["gbps"] > 0)]
            if len(k):
                top = k.loc[k["size_bytes"].idxmax()]
                size, cache = _num(top["size_bytes"]), _num(top.get("cache_bytes"))
                row.update(bandwidth_gbps=float(top["gbps"]), bandwidth_size_bytes=size,
                           beyond_cache=bool(_finite(cache) and size > cache),
                           bandwidth_source=f"measured {kernel} at {size / 2 ** 20:.4g} MiB per array")
                break
        if not _finite(row["bandwidth_gbps"]) and _finite(peak):
            row.update(bandwidth_gbps=peak, bandwidth_source="datasheet peak (no bandwidth measured)")
        out.append(row)
    return pd.DataFrame(out, columns=cols)


def _compute_roofs(matmul: pd.DataFrame, search: pd.DataFrame) -> dict:
    """(run_id, device, dtype) -> (compute roof TFLOP/s, its source)."""
    roofs: dict = {}
    frames = [f for f in (matmul, search) if f is not None and not f.empty and "dtype" in f.columns]
    if not frames:
        return roofs
    df = pd.concat([f[[c for c in ("run_id", "device", "dtype", "peak_tflops", "tflops", "status") if c in f.columns]]
                    for f in frames], ignore_index=True)
    for key, g in df.groupby(["run_id", "device", "dtype"], sort=False):
        peaks = pd.to_numeric(g["peak_tflops"], errors="coerce").dropna()
        if len(peaks):
            roofs[key] = (float(peaks.iloc[0]), "peak")
            continue
        best = pd.to_numeric(g[g["status"].isin(TRUSTED)]["tflops"], errors="coerce").dropna()
        if len(best):
            roofs[key] = (float(best.max()), "best measured (no peak known)")
    return roofs


POINT_COLUMNS = ["run_id", "backend", "device", "device_name", "kind", "point", "dtype", "m", "n", "k", "flops",
                 "bytes", "intensity", "time_s", "tflops", "compute_roof_tflops", "roof_source", "bandwidth_gbps",
                 "bandwidth_source", "attainable_tflops", "pct_of_roof", "launch_s", "launches", "verdict"]


def _point(r, kind: str, point: str, dtype: str, m, n, k, flops: float, nbytes: float, time_s: float,
           roofs: dict, dev: dict, launches: int = 1) -> dict:
    compute, source = roofs.get((r["run_id"], r["device"], dtype), (math.nan, "none"))
    bw, launch = dev.get("bandwidth_gbps", math.nan), dev.get("launch_s", math.nan)
    i = intensity(flops, nbytes)
    tflops = flops / time_s / 1e12 if _finite(time_s) and time_s > 0 else math.nan
    roof = attainable_tflops(i, bw, compute)
    return {"run_id": r["run_id"], "backend": r.get("backend", ""), "device": r["device"],
            "device_name": r.get("device_name", ""), "kind": kind, "point": point, "dtype": dtype, "m": m, "n": n,
            "k": k, "flops": flops, "bytes": nbytes, "intensity": i, "time_s": time_s, "tflops": tflops,
            "compute_roof_tflops": compute, "roof_source": source, "bandwidth_gbps": bw,
            "bandwidth_source": dev.get("bandwidth_source", ""), "attainable_tflops": roof,
            "pct_of_roof": 100 * tflops / roof if _finite(roof) and roof > 0 else math.nan, "launch_s": launch,
            "launches": launches, "verdict": classify(time_s, i, bw, compute, launch, launches)}


def roofline_points(tables: dict) -> pd.DataFrame:
    """Every trustworthy matmul point (``kind``: ``square``, ``shape``, ``search``: the search's best) and
    every AMP mode of every workload (``amp``: mean step over seeds) with its intensity, roofs and verdict."""
    matmul, search = tables.get("matmul"), tables.get("matmul_search")
    roofs = _compute_roofs(matmul, search)
    devs = {(r["run_id"], r["device"]): r for r in device_roofs(tables.get("membw")).to_dict("records")}
    points = []
    if matmul is not None and not matmul.empty:
        mm = matmul[matmul["status"].isin(TRUSTED) & (pd.to_numeric(matmul["median_s"], errors="coerce") > 0)]
        for r in mm.to_dict("records"):
            n = int(_num(r["n"]))
            m = int(_num(r.get("m"))) if _finite(r.get("m")) else n
            k = int(_num(r.get("k"))) if _finite(r.get("k")) else n
            name = r.get("shape_name") if isinstance(r.get("shape_name"), str) else ""
            kind, label = ("shape", name) if name else ("square", f"n={n}")
            points.append(_point(r, kind, label, r["dtype"], m, n, k, 2.0 * m * n * k,
                                 gemm_bytes(m, n, k, r["dtype"]), _num(r["median_s"]), roofs,
                                 devs.get((r["run_id"], r["device"]), {})))
    if search is not None and not search.empty and "best" in search.columns:
        best = search[search["best"].astype(str).str.lower().isin(["true", "1"]) & search["status"].isin(TRUSTED)]
        for r in best.to_dict("records"):
            m, n, k = (int(_num(r[a])) for a in ("m", "n", "k"))
            points.append(_point(r, "search", f"searched {m}x{n}x{k}", r["dtype"], m, n, k, 2.0 * m * n * k,
                                 gemm_bytes(m, n, k, r["dtype"]), _num(r["median_s"]), roofs,
                                 devs.get((r["run_id"], r["device"]), {})))
    points += _amp_points(tables, roofs, devs)
    return pd.DataFrame(points, columns=POINT_COLUMNS)


def _amp_points(tables: dict, roofs: dict, devs: dict) -> list[dict]:
    trials, runs = tables.get("amp_trials"), tables.get("runs")
    if trials is None or trials.empty or runs is None or runs.empty:
        return []
    configs = {}
    for r in runs.to_dict("records"):
        try:
            configs[str(r["run_id"])] = json.loads(r["config_json"])["amp"]
        except (KeyError, TypeError, ValueError):
            continue
    ok = trials[(trials["status"] == "ok") & (pd.to_numeric(trials["step_median_s"], errors="coerce") > 0)]
    out = []
    for (run_id, device, workload, mode), g in ok.groupby(["run_id", "device", "workload", "mode"], sort=True):
        amp_cfg, dtype = configs.get(str(run_id)), MODE_DTYPE.get(str(mode))
        if amp_cfg is None or dtype is None:
            continue
        try:
            flops, nbytes, launches = step_flops_bytes(str(workload), amp_cfg, dtype)
        except (KeyError, TypeError, ValueError):
            continue
        r = g.iloc[0].to_dict()
        out.append(_point(r, "amp", f"{workload} {mode}", dtype, math.nan, math.nan, math.nan, flops, nbytes,
                          float(g["step_median_s"].mean()), roofs, devs.get((run_id, device), {}), launches))
    return out
