"""Published training throughput the training section shows beside a measured trial, each with its source and
its exact setting, and the rule for when a measured trial matches one (``compare``): the same device (a regular
expression on the device name), the same model (the preset) and the same precision and compile setting. Where
any differs, the report says what differs instead of a ratio.

Every figure was read from its source at the commit given (checked in the repository, not from memory).
"""

from __future__ import annotations

import re

TORCHTITAN = (
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md at commit "
    "31a17bfdb70bab6f62a13d21816a5339b911d6e3 (benchmarks run 2024-12; torch 1963fc8 2024-12-23, "
    "torchtitan 9dec370 2024-12-26), Table 1"
)
DLE = (
    "NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md at commit "
    '291f0d02e815b148fa5c2b81bf07aa3552142895, "Training performance: NVIDIA DGX A100 (8x A100 80GB)", 1 GPU row'
)

REFERENCES = (
    {
        "key": "torchtitan_llama31_8b_fsdp",
        "label": "torchtitan Llama 3.1 8B, FSDP, bf16",
        "workload": "gpt",
        "model": "Llama 3.1 8B",
        "presets": (),
        "metric": "tokens_per_s",
        "value": 5762.0,
        "unit": "tokens/s per GPU",
        "mfu_pct": (33.0, 39.0),
        "precision": "bfloat16",
        "compiled": False,
        "gpus": 8,
        "devices": (r"\bH100\b",),
        "device": "H100 (96GB HBM2e, 500 W)",
        "source": TORCHTITAN,
        "url": "https://github.com/pytorch/torchtitan/blob/31a17bfdb70bab6f62a13d21816a5339b911d6e3/"
        "benchmarks/llama3_h100_202412_torchtitan.md",
        "setting": "Llama 3.1 8B, 8 H100 GPUs (96GB HBM2e SXM at the default 500 W limit), FSDP, local batch 2, global "
        "batch 16, selective activation checkpointing, bf16, eager; tokens/s per GPU read at iteration 90; "
        "the text gives 33-39% MFU for 1D Llama 3.1 8B without Float8 (against the H100 SXM peak)",
    },
    {
        "key": "torchtitan_llama31_8b_fsdp_compile",
        "label": "torchtitan Llama 3.1 8B, FSDP + torch.compile, bf16",
        "workload": "gpt",
        "model": "Llama 3.1 8B",
        "presets": (),
        "metric": "tokens_per_s",
        "value": 6667.0,
        "unit": "tokens/s per GPU",
        "mfu_pct": None,
        "precision": "bfloat16",
        "compiled": True,
        "gpus": 8,
        "devices": (r"\bH100\b",),
        "device": "H100 (96GB HBM2e, 500 W)",
        "source": TORCHTITAN,
        "url": "https://github.com/pytorch/torchtitan/blob/31a17bfdb70bab6f62a13d21816a5339b911d6e3/"
        "benchmarks/llama3_h100_202412_torchtitan.md",
        "setting": "as the FSDP row, with torch.compile: 6,667 against 5,762 tokens/s per GPU, +15.7% from compile",
    },
    {
        "key": "dle_resnet50_a100_tf32",
        "label": "DeepLearningExamples ResNet-50 v1.5, TF32",
        "workload": "resnet",
        "model": "ResNet-50 v1.5",
        "presets": ("resnet50",),
        "metric": "images_per_s",
        "value": 938.0,
        "unit": "images/s",
        "mfu_pct": None,
        "precision": "tf32",
        "compiled": False,
        "gpus": 1,
        "devices": (r"\bA100\b.*80GB|A100-SXM4-80GB",),
        "device": "A100 80GB (DGX A100)",
        "source": DLE,
        "url": "https://github.com/NVIDIA/DeepLearningExamples/blob/291f0d02e815b148fa5c2b81bf07aa3552142895/"
        "PyTorch/Classification/ConvNets/resnet50v1.5/README.md",
        "setting": "ResNet-50 v1.5 (stride on the 3x3, as here), 1 A100 80GB, TF32, ImageNet 224² with DALI loading, "
        "the README's benchmark_training config, pytorch-21.03 NGC container",
    },
    {
        "key": "dle_resnet50_a100_amp",
        "label": "DeepLearningExamples ResNet-50 v1.5, AMP",
        "workload": "resnet",
        "model": "ResNet-50 v1.5",
        "presets": ("resnet50",),
        "metric": "images_per_s",
        "value": 2470.0,
        "unit": "images/s",
        "mfu_pct": None,
        "precision": "float16",
        "compiled": False,
        "gpus": 1,
        "devices": (r"\bA100\b.*80GB|A100-SXM4-80GB",),
        "device": "A100 80GB (DGX A100)",
        "source": DLE,
        "url": "https://github.com/NVIDIA/DeepLearningExamples/blob/291f0d02e815b148fa5c2b81bf07aa3552142895/"
        "PyTorch/Classification/ConvNets/resnet50v1.5/README.md",
        "setting": "as the TF32 row, mixed precision (fp16 AMP): 2.63x the TF32 throughput",
    },
)

PRECISION = {"fp32": "float32", "tf32": "tf32", "amp_bf16": "bfloat16", "amp_fp16": "float16"}


def precision_of(mode: str) -> tuple[str, bool]:
    """(precision, compiled) of a trial's mode: ``amp_bf16_compiled`` -> (bfloat16, True)."""
    compiled = mode.endswith("_compiled")
    base = mode[: -len("_compiled")] if compiled else mode
    return PRECISION.get(base, base), compiled


def differences(ref: dict, point: dict) -> list[str]:
    """What differs between a measured point (device_name, workload, preset, mode, world) and the reference,
    one phrase each; empty when they match (then a ratio means something)."""
    out = []
    name = str(point.get("device_name") or "")
    if not any(re.search(p, name) for p in ref["devices"]):
        out.append(f"device: here {name or 'unknown'}, the figure's {ref['device']}")
    preset = str(point.get("preset") or "")
    if preset not in ref["presets"]:
        out.append(f"model: here {point.get('workload')} preset {preset or '?'}, the figure's {ref['model']}")
    precision, compiled = precision_of(str(point.get("mode", "")))
    if precision != ref["precision"]:
        out.append(f"precision: here {precision}, the figure's {ref['precision']}")
    if compiled != ref["compiled"]:
        out.append(
            "compile: "
            + ("here torch.compile, the figure eager" if compiled else "here eager, the figure torch.compile")
        )
    if int(point.get("world", 1)) != ref["gpus"]:
        out.append(f"GPUs: here {int(point.get('world', 1))}, the figure's {ref['gpus']} (per-GPU figure)")
    return out


def compare(points: list[dict]) -> list[dict]:
    """Per reference, the measured points of its workload: a ratio where nothing differs, else what differs (the
    closest point: the fewest differences)."""
    rows = []
    for ref in REFERENCES:
        mine = [p for p in points if p.get("workload") == ref["workload"]]
        matched = [p for p in mine if not differences(ref, p)]
        base = {
            "label": ref["label"],
            "value": ref["value"],
            "unit": ref["unit"],
            "setting": ref["setting"],
            "source": ref["source"],
            "url": ref["url"],
            "mfu": "" if not ref["mfu_pct"] else f"{ref['mfu_pct'][0]:g}–{ref['mfu_pct'][1]:g}%",
        }
        if matched:
            for p in matched:
                value = p.get(ref["metric"])
                rows.append(
                    {
                        **base,
                        "measured": value,
                        "ratio": value / ref["value"] if value else None,
                        "where": f"{p.get('device_name')} {p.get('mode')}",
                        "differs": "",
                    }
                )
        elif mine:
            closest = min(mine, key=lambda p: len(differences(ref, p)))
            rows.append(
                {
                    **base,
                    "measured": None,
                    "ratio": None,
                    "where": f"{closest.get('device_name')} {closest.get('preset')} {closest.get('mode')}",
                    "differs": "; ".join(differences(ref, closest)),
                }
            )
    return rows
