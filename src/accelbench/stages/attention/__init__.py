"""The ``attention`` device stage as one plug-in: ``torch.nn.functional.scaled_dot_product_attention``
forward and forward+backward across batch x heads x sequence length x head dim, causal and not, per dtype
and per SDPA kernel (flash, memory-efficient, cuDNN, math) the device has.

This module is the declaration only (standard library imports only; ``accelbench.plugin``): the measuring
code is ``measure.py``, the figures ``figures.py``, the report section ``section.py`` with its template
``section.html.j2``, the published figures it is shown against ``references.py``. The measurement and its
trade-offs are described in ``measure.py``'s docstring.
"""

from __future__ import annotations

from accelbench.columns import DEVICE, DEVICE_WARMUP, PROVENANCE, WITHIN_RUN_CI, WITHIN_RUN_CI_DESCRIBE
from accelbench.plugin import Compare, Figure, Hook, Resources, Roofline, Section, Stage, Table

PKG = "accelbench.stages.attention"
KERNELS = ("flash", "efficient", "cudnn", "math")
DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3fn")
MODES = ("forward", "forward_backward")
STATUSES = ("ok", "unstable", "invalid", "wrong_result", "oom", "unsupported", "error", "absent")
IDENTITY = ("device_name", "kernel", "dtype", "mode", "batch", "heads", "seq_len_q", "seq_len_k", "head_dim", "causal")

DESCRIBE = {
    "kernel": "SDPA kernel forced with torch.nn.attention.sdpa_kernel: flash, efficient, cudnn or math",
    "dtype": "dtype of q, k and v (bfloat16, float16, float32, float8_e4m3fn)",
    "mode": "forward, or forward_backward (the forward and torch.autograd.grad of q, k, v in one call)",
    "batch": "batch size b (attention.batch, or attention.tokens // seq_len_q)",
    "heads": "attention heads h (query and key/value: no GQA)",
    "seq_len_q": "query sequence length s_q",
    "seq_len_k": "key/value sequence length s_k",
    "head_dim": "head dimension d",
    "causal": "is_causal (top-left aligned causal mask)",
    "flops": "FLOP per call by FlashAttention's benchmark convention: forward 4·b·h·s_q·s_k·d, halved when "
    "causal; forward_backward 3.5x that (backward 2.5x forward)",
    "threads": "torch threads",
    "median_s": "s — median seconds per call (torch.utils.benchmark, the backend's synchronizing timer)",
    "iqr_s": "s — interquartile range of the per-call times of the blocks",
    "ci95_low_s": "s — 95% interval of the median, low end, over the blocks of this run (ci_method says how: "
    "batch means or descriptive); it covers variation within this run, not run to run",
    "ci95_high_s": "s — 95% interval of the median, high end",
    **WITHIN_RUN_CI_DESCRIBE,
    "repeats": "timed calls in all",
    "tflops": "TFLOP/s — flops / median_s / 1e12",
    "peak_tflops": "TFLOP/s — the backend's peak for the dtype (datasheet table, or the CPU's computed peak)",
    "peak_source": "where peak_tflops comes from",
    "pct_of_peak": "% — 100 · tflops / peak_tflops",
    "peak_mem_bytes": "bytes — peak memory during one untimed call (mem_kind says which counter); null where "
    "the device has none",
    "work_mem_bytes": "bytes — peak_mem_bytes minus what was in use just before the call (q, k, v and the "
    "gradient seed included in the latter): what the kernel itself needed",
    "mem_kind": "allocator (the device allocator's max_memory_allocated), rss (CPU: the process's resident "
    "high-water mark, reset per point), rss_process_peak, or empty",
    "rel_error": "relative Frobenius error of the output (and, for forward_backward, the worst of the "
    "gradients) against float64 math attention of the same inputs",
    "rel_error_max": "the dtype's threshold (attention.rel_error_max): above it the point is wrong_result",
    "status": "ok, unstable, invalid, wrong_result, oom, unsupported, error or absent",
    "status_detail": "why, in one line (torch's reason for an unsupported kernel)",
    "blocks": "timed blocks (one raw sample each in the samples file)",
    "sdpa_backend": "the torch.nn.attention.SDPBackend member the point forced",
    "torch_dtype": "the torch dtype of q, k and v",
    "min_bytes": "bytes — least memory traffic of one call: q, k, v read and o written once (backward: q, k, v, o, "
    "dO read and dq, dk, dv written once more), at the dtype's element size",
    "intensity_flop_per_byte": "FLOP/byte — flops / min_bytes: where the point lies on a roofline",
}

COLUMNS = (
    *PROVENANCE,
    *DEVICE,
    "kernel",
    "dtype",
    "mode",
    "batch",
    "heads",
    "seq_len_q",
    "seq_len_k",
    "head_dim",
    "causal",
    "flops",
    "threads",
    "median_s",
    "iqr_s",
    "ci95_low_s",
    "ci95_high_s",
    *WITHIN_RUN_CI,
    "repeats",
    "tflops",
    "peak_tflops",
    "peak_source",
    "pct_of_peak",
    "peak_mem_bytes",
    "work_mem_bytes",
    "mem_kind",
    "rel_error",
    "rel_error_max",
    "status",
    "status_detail",
    *DEVICE_WARMUP,
)
EXTRA = ("blocks", "sdpa_backend", "torch_dtype", "min_bytes", "intensity_flop_per_byte")
NUMERIC = (
    "batch",
    "heads",
    "seq_len_q",
    "seq_len_k",
    "head_dim",
    "flops",
    "threads",
    "median_s",
    "iqr_s",
    "ci95_low_s",
    "ci95_high_s",
    "repeats",
    "tflops",
    "peak_tflops",
    "pct_of_peak",
    "peak_mem_bytes",
    "work_mem_bytes",
    "rel_error",
    "rel_error_max",
    "lag1_autocorr",
)

DEFAULTS = {
    "kernels": list(KERNELS),  # those the device has are measured (measure.device_kernels)
    "dtypes": ["bfloat16", "float16", "float32"],
    "fp8": True,  # adds float8_e4m3fn where torch has the dtype (unsupported where SDPA refuses)
    "modes": list(MODES),
    "batch": 2,
    "tokens": None,  # set: batch = tokens // seq_len per point (the FlashAttention papers: 16k tokens)
    "heads": 16,
    "seq_lens": [512, 1024, 2048, 4096],
    "head_dims": [64, 128],
    "causal": [False, True],
    "min_run_time_s": 0.1,
    "unstable_iqr_ratio": 0.1,
    "memory_fraction": 0.8,  # a point whose predicted working set exceeds this share of free memory: oom, not run
    "rel_error_max": {"float32": 1.0e-4, "bfloat16": 3.0e-2, "float16": 5.0e-3, "float8_e4m3fn": 1.5e-1},
    "peak_tflops": {},
    # the host (the CPU) is ~100x slower: its sweep replaces these keys (the default pipeline stays short)
    "host": {
        "kernels": ["flash", "math"],
        "dtypes": ["bfloat16", "float32"],
        "fp8": False,
        "batch": 1,
        "heads": 4,
        "seq_lens": [64, 256],
        "head_dims": [64],
        "min_run_time_s": 0.02,
    },
}

_POS = {"type": "number", "exclusiveMinimum": 0}
_POSINT = {"type": "integer", "minimum": 1}
_SWEEP = {
    "kernels": {"type": "array", "items": {"enum": list(KERNELS)}, "minItems": 1, "uniqueItems": True},
    "dtypes": {"type": "array", "items": {"enum": list(DTYPES)}, "minItems": 1, "uniqueItems": True},
    "fp8": {"type": "boolean"},
    "modes": {"type": "array", "items": {"enum": list(MODES)}, "minItems": 1, "uniqueItems": True},
    "batch": _POSINT,
    "tokens": {"type": ["integer", "null"], "minimum": 1},
    "heads": _POSINT,
    "seq_lens": {"type": "array", "items": _POSINT, "minItems": 1, "uniqueItems": True},
    "head_dims": {"type": "array", "items": _POSINT, "minItems": 1, "uniqueItems": True},
    "causal": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "uniqueItems": True},
    "min_run_time_s": _POS,
}
SCHEMA = {
    "description": "scaled_dot_product_attention throughput per SDPA kernel (stage attention)",
    "type": "object",
    "additionalProperties": False,
    "default": {},
    "properties": {
        **{k: {**v, "default": DEFAULTS[k]} for k, v in _SWEEP.items()},
        "unstable_iqr_ratio": {**_POS, "default": DEFAULTS["unstable_iqr_ratio"]},
        "memory_fraction": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "default": DEFAULTS["memory_fraction"],
        },
        "rel_error_max": {
            "type": "object",
            "additionalProperties": False,
            "default": {},
            "properties": {d: {**_POS, "default": v} for d, v in DEFAULTS["rel_error_max"].items()},
        },
        "peak_tflops": {
            "description": "overrides of the peak, {backend: {dtype: TFLOP/s}}",
            "type": "object",
            "default": {},
            "propertyNames": {"enum": ["cpu", "cuda", "rocm", "mps", "xla", "xpu"]},
            "additionalProperties": {
                "type": "object",
                "propertyNames": {"enum": list(DTYPES)},
                "additionalProperties": _POS,
            },
        },
        "host": {
            "description": "sweep keys replaced where the backend is the host (the CPU), not an accelerator",
            "type": "object",
            "additionalProperties": False,
            "default": DEFAULTS["host"],
            "properties": _SWEEP,
        },
    },
}

# bench/gpu_check.sh: bf16, sequence 1k-16k, head dim 128, causal and not, flash and cuDNN (FA3's setting:
# 16k tokens per batch, hidden 2048 = 16 heads of 128)
GPU_CHECK = {
    "kernels": ["flash", "cudnn"],
    "dtypes": ["bfloat16"],
    "fp8": False,
    "modes": ["forward"],
    "batch": 1,
    "tokens": 16384,
    "heads": 16,
    "seq_lens": [1024, 2048, 4096, 8192, 16384],
    "head_dims": [128],
    "causal": [False, True],
    "min_run_time_s": 0.05,
}

TABLE = Table(
    "attention",
    "attention_{backend}.csv",
    COLUMNS,
    extra=EXTRA,
    numeric=NUMERIC,
    statuses=STATUSES,
    identity=IDENTITY,
    describe=DESCRIBE,
    compare=Compare(median="median_s", lower_is_better=True, ci=("ci95_low_s", "ci95_high_s")),
    samples="attention_{backend}_samples.parquet",
    since="attention",
    roofline=Roofline(
        points=Hook("accelbench.stages.attention.roofline:points"),
        markers={"attention": ("D", "attention (SDPA) call, FlashAttention's FLOP count")},
    ),
)

PLUGIN = Stage(
    "attention",
    "scaled_dot_product_attention forward and forward+backward per SDPA kernel, dtype and shape",
    "device",
    entry=f"{PKG}.measure",
    tables=(TABLE,),
    figures=(
        Figure("attention_tflops", ("attention",), draw=Hook(f"{PKG}.figures:fig_tflops")),
        Figure("attention_memory", ("attention",), draw=Hook(f"{PKG}.figures:fig_memory")),
    ),
    sections=(
        Section("attention", "Attention", 45, context=Hook(f"{PKG}.section:context"), template="section.html.j2"),
    ),
    config_key="attention",
    defaults=DEFAULTS,
    schema=SCHEMA,
    resources=Resources(mem_mb=16000, runtime_min=60, gpu=True),
    method_version=1,
    checkpoint=True,
    since_config_key="attention",
    gpu_check=GPU_CHECK,
)
