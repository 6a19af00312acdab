"""The AMP stage's points on the roofline: a training step's intensity *estimated from the model's GEMMs*, read
from the run's config.

Every Linear layer's product (batch x in) @ (in x out) forward, and backward the input gradient (batch x out) @
(out x in) and the weight gradient (out x batch) @ (batch x in) (the first layer has no input gradient: its input
needs none); for the transformer also attention's two batched products per (example, head), S x dh @ dh x S and
S x S @ S x dh, and their four backward products. Element size: 2 bytes in AMP modes (autocast runs the products
in bf16/fp16), 4 in fp32/tf32. Elementwise ops, normalization, the optimizer and the casts autocast adds are not
counted, so the real traffic is higher (the real intensity lower) than estimated, and the achieved TFLOP/s (GEMM
flops / step time) is a lower bound of the work done. The GEMM count is the step's ``launches``.
"""

from __future__ import annotations

import json

import pandas as pd

from ...reporting.roofline import Gemm, linear_gemms

# the dtype of a mode's products
MODE_DTYPE = {"fp32": "float32", "tf32": "tf32", "amp_bf16": "bfloat16", "amp_fp16": "float16"}


def step_gemms(workload: str, amp_cfg: dict) -> list[Gemm]:
    """Every matrix product of one training step (forward and backward) of an AMP workload, from the config
    (``measure`` builds the models: ``build_mlp``, ``build_transformer``)."""
    d = amp_cfg["data"]
    batch = int(amp_cfg["batch_size"])
    if workload == "mlp":
        c = amp_cfg["mlp"]
        dims = [d["n_features"]] + [c["hidden"]] * c["layers"] + [d["n_classes"]]
        gemms = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            gemms += linear_gemms(f"linear{i}", batch, a, b, needs_input_grad=i > 0)
        return gemms
    if workload == "transformer":
        c = amp_cfg["transformer"]
        s, dm, ff, heads = c["seq_len"], c["d_model"], c["ff"], c["n_heads"]
        tokens, dh = batch * s, dm // heads
        gemms = linear_gemms("embed", tokens, d["n_features"], dm, needs_input_grad=False)
        for layer in range(c["layers"]):
            p = f"layer{layer}"
            gemms += linear_gemms(f"{p}.qkv", tokens, dm, 3 * dm, True)
            bh = batch * heads
            gemms += [
                Gemm(f"{p}.scores", s, s, dh, bh),
                Gemm(f"{p}.context", s, dh, s, bh),
                Gemm(f"{p}.scores.grad", s, s, dh, bh),
                Gemm(f"{p}.context.grad_v", s, dh, s, bh),
                Gemm(f"{p}.scores.grad_q", s, dh, s, bh),
                Gemm(f"{p}.scores.grad_k", s, dh, s, bh),
            ]
            gemms += linear_gemms(f"{p}.out", tokens, dm, dm, True)
            gemms += linear_gemms(f"{p}.ff_up", tokens, dm, ff, True)
            gemms += linear_gemms(f"{p}.ff_down", tokens, ff, dm, True)
        gemms += linear_gemms("head", batch, dm, d["n_classes"], True)
        return gemms
    raise ValueError(f"amp.workloads: unknown {workload!r}; allowed: mlp, transformer")


def step_flops_bytes(workload: str, amp_cfg: dict, dtype: str) -> tuple[float, float, int]:
    """(GEMM flops, GEMM bytes, GEMM launches) of one training step."""
    gemms = step_gemms(workload, amp_cfg)
    return float(sum(g.flops for g in gemms)), float(sum(g.bytes(dtype) for g in gemms)), len(gemms)


def points(trials: pd.DataFrame, tables: dict) -> list[dict]:
    """One point per (run, device, workload, mode) with a trial ok: the mean step time over its seeds."""
    runs = tables.get("runs")
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
    for (run_id, _device, workload, mode), g in ok.groupby(["run_id", "device", "workload", "mode"], sort=True):
        amp_cfg, dtype = configs.get(str(run_id)), MODE_DTYPE.get(str(mode))
        if amp_cfg is None or dtype is None:
            continue
        try:
            flops, nbytes, launches = step_flops_bytes(str(workload), amp_cfg, dtype)
        except (KeyError, TypeError, ValueError):
            continue
        r = g.iloc[0].to_dict()
        out.append(
            {
                **_where(r),
                "kind": "amp",
                "point": f"{workload} {mode}",
                "dtype": dtype,
                "flops": flops,
                "bytes": nbytes,
                "time_s": float(g["step_median_s"].mean()),
                "launches": launches,
            }
        )
    return out


def _where(r: dict) -> dict:
    return {c: r.get(c, "") for c in ("run_id", "backend", "device", "device_name")}
