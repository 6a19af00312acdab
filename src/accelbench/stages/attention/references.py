"""Published attention throughput the report shows beside a matching device, each with its source and its
exact setting, and the rule for when a measured device matches (``compare``).

All three count FLOPs by the convention this stage uses (``measure.attention_flops``): flash-attn's
``benchmarks/benchmark_flash_attention.py``. The papers' benchmark grid: sequence lengths 512 to 16k with
batch x sequence = 16k tokens, hidden size 2048 (head dim 64: 32 heads, 128: 16 heads, 256: 8 heads), with
and without the causal mask; each figure is the highest over that grid, not one named point.
"""

from __future__ import annotations

import re

PAPER_GRID = {"seq_lens": (512, 16384), "tokens_per_batch": 16384, "hidden": 2048, "causal": (False, True)}

REFERENCES = (
    {
        "key": "fa2_a100_forward",
        "label": "FlashAttention-2, forward",
        "tflops": 230.0,
        "pct_of_peak": 73.0,
        "pct_published": True,
        "peak_tflops": 312.0,
        "source": "T. Dao, FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning, "
        "arXiv:2307.08691 (v1 2023-07-17), abstract and section 4.1",
        "url": "https://arxiv.org/abs/2307.08691",
        "device": "A100 80GB SXM4",
        "devices": (r"\bA100\b",),
        "comparable": {},
        "dtypes": ("float16",),
        "mode": "forward",
        "head_dims": (64, 128),
        "setting": "forward pass, FP16, head dim 64 or 128, sequence 512-16k at 16k tokens per batch, hidden 2048, "
        "causal and not; the highest of that grid",
    },
    {
        "key": "fa3_h100_fp16_forward",
        "label": "FlashAttention-3, FP16 forward",
        "tflops": 740.0,
        "pct_of_peak": 75.0,
        "pct_published": True,
        "peak_tflops": 989.0,
        "source": "J. Shah, G. Bikshandi, Y. Zhang, V. Thakkar, P. Ramani, T. Dao, FlashAttention-3: Fast and "
        "Accurate Attention with Asynchrony and Low-precision, arXiv:2407.08608 (v1 2024-07-11), "
        "abstract and section 4.1",
        "url": "https://arxiv.org/abs/2407.08608",
        "device": "H100 80GB SXM5",
        "devices": (r"\bH100\b",),
        "comparable": {
            r"\bH200\b": "H200: the same GH100 compute as H100 SXM5 (989 TFLOP/s dense FP16/BF16), "
            "with more and faster HBM"
        },
        "dtypes": ("float16",),
        "mode": "forward",
        "head_dims": (64, 128, 256),
        "setting": "forward pass, FP16, head dim 64, 128 or 256, sequence 512-16k at 16k tokens per batch, "
        "hidden 2048, causal and not; the highest of that grid",
    },
    {
        "key": "fa3_h100_fp8_forward",
        "label": "FlashAttention-3, FP8 forward",
        # the paper gives no utilization for FP8: 1200 / 1979 (H100 SXM5 dense FP8, datasheet) computed here
        "tflops": 1200.0,
        "pct_of_peak": 61.0,
        "pct_published": False,
        "peak_tflops": 1979.0,
        "source": 'Shah et al., FlashAttention-3, arXiv:2407.08608 (v1 2024-07-11): "close to 1.2 PFLOPs/s" '
        "with FP8, abstract",
        "url": "https://arxiv.org/abs/2407.08608",
        "device": "H100 80GB SXM5",
        "devices": (r"\bH100\b",),
        "comparable": {
            r"\bH200\b": "H200: the same GH100 compute as H100 SXM5 (1979 TFLOP/s dense FP8), with more and faster HBM"
        },
        "dtypes": ("float8_e4m3fn",),
        "mode": "forward",
        "head_dims": (64, 128, 256),
        "setting": "forward pass, FP8 e4m3 (block quantization), head dim 64, 128 or 256, sequence 512-16k at 16k "
        "tokens per batch, hidden 2048, causal and not; the highest of that grid",
    },
)

DTYPE_NAME = {"float16": "FP16", "bfloat16": "BF16", "float32": "FP32", "float8_e4m3fn": "FP8"}


def device_match(ref: dict, device_name: str) -> tuple[str, str]:
    """(``same``, ``comparable`` or ``differs``, the note): the device is the paper's, one with the same
    compute (its note says what differs), or another."""
    name = str(device_name or "")
    if any(re.search(p, name) for p in ref["devices"]):
        return "same", ""
    for pattern, note in ref["comparable"].items():
        if re.search(pattern, name):
            return "comparable", note
    return "differs", f"this device is {name or 'unknown'}; the figure is from {ref['device']}"


def setting_differences(ref: dict, point: dict) -> list[str]:
    """What differs between a measured point (a row as a dict) and the paper's setting, one phrase each."""
    out = []
    if point.get("dtype") not in ref["dtypes"]:
        out.append(
            f"dtype {DTYPE_NAME.get(point.get('dtype'), point.get('dtype'))} "
            f"(the paper's {'/'.join(DTYPE_NAME[d] for d in ref['dtypes'])})"
        )
    if int(point.get("head_dim") or 0) not in ref["head_dims"]:
        out.append(f"head dim {point.get('head_dim')} (the paper's {', '.join(map(str, ref['head_dims']))})")
    seq = int(point.get("seq_len_q") or 0)
    lo, hi = PAPER_GRID["seq_lens"]
    if not lo <= seq <= hi:
        out.append(f"sequence {seq} (the paper's {lo}-{hi})")
    tokens = int(point.get("batch") or 0) * seq
    if tokens != PAPER_GRID["tokens_per_batch"]:
        out.append(f"batch x sequence = {tokens} tokens (the paper's {PAPER_GRID['tokens_per_batch']})")
    if point.get("kernel") not in ("flash", "cudnn"):
        out.append(f"kernel {point.get('kernel')} (the paper's own kernel; torch's flash is FlashAttention-2)")
    return out


def compare(ref: dict, device_name: str, points: list[dict]) -> dict:
    """The reference beside one device: for a matching (or same-compute) device the best measured point in
    the reference's mode (its dtype preferred), its TFLOP/s over the reference's and what differs; for any
    other device only what differs."""
    level, note = device_match(ref, device_name)
    out = {
        "key": ref["key"],
        "label": ref["label"],
        "tflops": ref["tflops"],
        "pct_of_peak": ref["pct_of_peak"],
        "source": ref["source"],
        "url": ref["url"],
        "setting": ref["setting"],
        "device": ref["device"],
        "match": level,
        "ours": None,
        "ratio": None,
        "point": "",
        "differences": [note] if note else [],
    }
    if level == "differs":
        return out
    same_mode = [p for p in points if p.get("mode") == ref["mode"]]
    in_dtype = [p for p in same_mode if p.get("dtype") in ref["dtypes"]]
    # BF16 has the FP16 peak on these GPUs: the nearest measured setting when FP16 was not run
    near = in_dtype or [
        p for p in same_mode if p.get("dtype") in ("float16", "bfloat16") and "float8_e4m3fn" not in ref["dtypes"]
    ]
    if not near:
        out["differences"].append(
            f"no trusted {ref['mode']} point in {'/'.join(DTYPE_NAME[d] for d in ref['dtypes'])} "
            "measured on this device"
        )
        return out
    best = max(near, key=lambda p: float(p["tflops"]))
    out.update(
        ours=float(best["tflops"]),
        ratio=float(best["tflops"]) / ref["tflops"],
        point=(
            f"{best['kernel']} {DTYPE_NAME.get(best['dtype'], best['dtype'])} b={best['batch']} "
            f"h={best['heads']} s={best['seq_len_q']} d={best['head_dim']}"
            f"{' causal' if str(best['causal']).lower() in ('true', '1') else ''}"
        ),
    )
    out["differences"] += setting_differences(ref, best)
    return out
