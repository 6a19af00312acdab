"""The AMP stage's training workloads that people compare published numbers against: ``gpt`` (``gpt.py``) and
``resnet`` (``resnet.py``), in plain torch; also used by the scaling stage through ``amp.measure``.

``model_flops`` counts a training step's FLOPs with ``torch.utils.flop_counter.FlopCounterMode`` on the meta
device (no memory, no compute: the sizes of gpt2-124m or ResNet-50 count in a second on a laptop);
``analytic_flops`` is the closed form (6N + 12·L·H·Q·T per token; 3 x 2 x MACs per image). Both go on the rows.
"""

from __future__ import annotations

from . import gpt, resnet

PRESETS = {"gpt": gpt.GPT_PRESETS, "resnet": resnet.RESNET_PRESETS}
UNIT = {"gpt": "tokens", "resnet": "images"}  # what one trained item is


def sizes(workload: str, amp_cfg: dict) -> dict:
    """The resolved sizes of ``workload`` (its preset with the config's overrides)."""
    return (gpt.resolve if workload == "gpt" else resnet.resolve)(amp_cfg[workload])


def build(workload: str, amp_cfg: dict, torch):
    s = sizes(workload, amp_cfg)
    return gpt.build_gpt(s, torch) if workload == "gpt" else resnet.build_resnet(s, torch)


def items_per_example(workload: str, amp_cfg: dict) -> int:
    """Tokens per sequence (gpt) or 1 (an image)."""
    return sizes(workload, amp_cfg)["seq_len"] if workload == "gpt" else 1


def analytic_flops(workload: str, amp_cfg: dict, batch: int) -> float:
    """The closed-form training FLOPs of one step of ``batch`` examples."""
    s = sizes(workload, amp_cfg)
    if workload == "gpt":
        return gpt.analytic_flops_per_token(s) * s["seq_len"] * batch
    return resnet.analytic_flops_per_image(s) * batch


def _cpu_sdpa_flops(torch):
    """FlopCounterMode's formulas for the CPU flash-attention kernels, which its registry lacks (it has the
    CUDA flash, efficient and cuDNN kernels): the same dense-product count as theirs."""
    from torch.utils import flop_counter as fc  # torch only when counting: the presets import without it

    aten = torch.ops.aten
    mapping = {}
    fwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    bwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if fwd is not None:
        mapping[fwd] = lambda query, key, value, *args, out_shape=None, **kw: fc.sdpa_flop_count(
            query.shape, key.shape, value.shape
        )
    if bwd is not None:
        mapping[bwd] = lambda grad_out, query, key, value, *args, out_shape=None, **kw: fc.sdpa_backward_flop_count(
            grad_out.shape, query.shape, key.shape, value.shape
        )
    return mapping


def model_flops(workload: str, amp_cfg: dict, batch: int, torch) -> float:
    """FLOPs of one training step (forward, loss, backward) of ``batch`` examples counted by
    ``FlopCounterMode`` on the meta device (the optimizer step is not counted, as in MFU)."""
    from torch.utils.flop_counter import FlopCounterMode  # as above

    with torch.device("meta"):
        model = build(workload, amp_cfg, torch)
        s = sizes(workload, amp_cfg)
        if workload == "gpt":
            x = torch.zeros(batch, s["seq_len"], dtype=torch.long)
            y = torch.zeros(batch, s["seq_len"], dtype=torch.long)
        else:
            x = torch.zeros(batch, 3, s["image_size"], s["image_size"], dtype=torch.uint8)
            y = torch.zeros(batch, dtype=torch.long)
    counter = FlopCounterMode(display=False, custom_mapping=_cpu_sdpa_flops(torch))
    with counter:
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, -2), y.flatten())
        loss.backward()
    return float(counter.get_total_flops())
