"""Stage: AMP vs FP32 training trials. Is mixed precision faster here, by how much, and does the
model still learn?

For every device of one backend, every workload (``mlp``, ``transformer``, and the models published training
numbers are about: ``gpt`` and ``resnet``, in ``workloads/``) and every seed, the same model is trained once per
precision *mode*:

- ``fp32``: the baseline, strict float32 (``Backend.float32_math``: precision "highest", TF32 off in
  cuBLAS and cuDNN), so FP32 means IEEE fp32 math, not tensor-core TF32;
- ``tf32`` (where the backend has TF32: NVIDIA CUDA): the same fp32 model with TF32 allowed;
- ``amp_bf16`` or ``amp_fp16``: ``torch.autocast`` in the dtype ``Backend.amp_policy`` picks for the
  backend (fp16 + ``torch.amp.GradScaler`` on CUDA/ROCm/MPS, bf16 on CPU/XLA/XPU, or ``amp.dtype``).

Within a seed every mode starts from identical weights (built on the CPU from ``torch.manual_seed(seed)``,
then moved) and sees the same batches in the same order; only the precision differs, so the modes are
compared seed by seed (``amp_summary``). The data set is generated, learnable and fixed by the config's
``seed`` (no downloads): inputs are Gaussian, labels come from a fixed random *teacher* network
(for the transformer, a teacher that attends over the sequence), so held-out accuracy well above the
majority class means the model learned something real.

Before its first trial each device is warmed in this process (``measure.stability.warm_device``),
recorded in ``device_warmup_*``.

Measured per step: wall time from a synchronized start to a synchronized end (``Backend.synchronizer``;
the loss is read after the clock stops), the loss, and for fp16 the GradScaler scale used and whether
the scaler skipped the step (its scale went down). The first ``amp.warmup_steps`` steps train but are
left out of the step-time statistics. Per trial: median step time, samples/s, peak memory, final train
loss, held-out accuracy. A NaN/inf loss ends that trial with status ``nan``; an exception ends it with
``error`` (``oom`` for out-of-memory); an AMP mode this torch cannot train here (``Backend.amp_support``: a
version floor) is recorded ``unsupported`` without running; the other trials go on. The batch order stays
on the host and each step's indices are moved to the device (indexing a device tensor with the step number
would recompile XLA's graph at every step). Each trial runs inside a window of its
device's telemetry sampler (``measure.telemetry``): clock, power, temperature, energy, samples per
joule and throttling go on its row (``trial_telemetry``), every reading into ``telemetry_amp``.

For gpt and resnet a trial also gets tokens/s or images/s, its step's FLOPs (``FlopCounterMode`` on the meta
device, and the analytic count), MFU against ``Backend.peak_tflops`` for its precision, the median step time's
interval over its steps, the loss floor of the gpt corpus; each workload section may set its own batch (``max``:
bisected on out-of-memory, ``choose_batch``), steps and learning rate. With ``amp.compile`` every mode runs again as
``<mode>_compiled`` (torch.compile, inductor): its first step's extra time is ``compile_s``, a failure to compile
is ``compile_error``, no C++ compiler on the CPU ``unsupported`` (``Backend.compile_support``). docs/training.md.

The CUDA, ROCm, MPS, XLA and XPU paths are untested on hardware: their dispatch (autocast dtype,
GradScaler, TF32 flags, memory counters) is unit-tested with fakes.
"""

from __future__ import annotations

import contextlib
import json
import math
import timeit
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch.nn.functional as F
from torch import Tensor

from ... import registry
from ...backends import AmpPolicy, Backend
from ...measure import blocks
from ...measure import samples as sample_table
from ...measure import telemetry as tm
from ...measure.failures import first_line
from ...run.io import Checkpoint, atomic_write_csv
from ..common import add_device_stage_arguments, start
from . import workloads as training_workloads
from .config_check import check_amp_config
from .stats import summarize_trials

BASELINE = "fp32"
STATUSES = ("ok", "nan", "oom", "unsupported", "compile_error", "error", "absent")
COMPILED = "_compiled"  # a mode's name under torch.compile: fp32_compiled, amp_bf16_compiled, ...
FINAL_LOSS_STEPS = 5  # final_loss: mean train loss of the last this many steps
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16"}

STEPS_COLUMNS = registry.TABLES["amp_steps"].all_columns
TRIALS_COLUMNS = registry.TABLES["amp_trials"].all_columns
SUMMARY_COLUMNS = registry.TABLES["amp_summary"].all_columns
SERIES_COLUMNS = registry.TABLES["telemetry_amp"].all_columns


# ---------------------------------------------------------------- modes and precision


def amp_mode_name(dtype: str) -> str:
    return f"amp_{DTYPE_SHORT[dtype]}"


def modes_for(backend: Backend, policy: AmpPolicy, info: dict | None = None, compiled: bool = False) -> list[str]:
    """The modes trained on a device of ``backend`` (``info``), baseline first: fp32, tf32 (where the device
    has it), then the AMP mode; with ``compiled`` (``amp.compile``) each again under torch.compile."""
    modes = [BASELINE]
    if backend.tf32_available(info) is None:
        modes.append("tf32")
    modes.append(amp_mode_name(policy.dtype))
    return modes + [m + COMPILED for m in modes] if compiled else modes


def compiles(amp_cfg: dict, workload: str) -> bool:
    """Whether ``workload`` also trains under torch.compile: ``amp.compile`` is true, or a list naming it."""
    value = amp_cfg.get("compile")
    return workload in value if isinstance(value, list) else bool(value)


def eager_mode(mode: str) -> str:
    """The precision mode of a (possibly compiled) mode: ``amp_bf16_compiled`` -> ``amp_bf16``."""
    return mode[: -len(COMPILED)] if mode.endswith(COMPILED) else mode


def is_compiled(mode: str) -> bool:
    return mode.endswith(COMPILED)


def compile_support(backend: Backend) -> str:
    """Why torch.compile (inductor) cannot run here, or "" (``Backend.compile_support``: on the CPU a C++
    compiler)."""
    return backend.compile_support()


def compile_model(model, torch):
    """``torch.compile(model)`` with the default inductor backend, after ``torch._dynamo.reset()``: every trial's
    model is a new module, and dynamo's per-code cache would otherwise fill (``recompile_limit``) and fall back to
    eager silently; inductor's on-disk caches stay, so a later trial's compile may be faster. Tests may
    substitute one."""
    with contextlib.suppress(Exception):
        torch._dynamo.reset()
    return torch.compile(model)


def is_compile_error(exc: BaseException) -> bool:
    """Whether ``exc`` came out of torch.compile's stack (dynamo, AOTAutograd, inductor)."""
    for cls in type(exc).__mro__:
        if cls.__module__.startswith(("torch._dynamo", "torch._inductor", "torch._functorch")):
            return True
    return False


def compile_reason(exc: BaseException) -> str:
    """One line for a compile failure: dynamo's wrapper (``BackendCompilerFailed: backend='inductor' raised:``)
    with the first line of the exception it wraps."""
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    head = first_line(exc)
    return f"{head.rstrip(':')}: {first_line(inner)}"[:300] if inner is not None else head


def peak_dtype(mode: str, policy: AmpPolicy) -> str:
    """The dtype whose peak a mode's MFU is against: float32, tf32 or the AMP dtype."""
    base = eager_mode(mode)
    return {"fp32": "float32", "tf32": "tf32"}.get(base, policy.dtype)


def autocast_context(mode: str, policy, torch):
    """``torch.autocast(device_type=policy.device_type, dtype=policy.dtype)`` for an AMP mode, else a no-op."""
    if not eager_mode(mode).startswith("amp_"):
        return contextlib.nullcontext()
    return torch.autocast(device_type=policy.device_type, dtype=getattr(torch, policy.dtype))


def grad_scaler(mode: str, policy, torch):
    """The GradScaler an AMP mode needs (fp16: ``torch.amp.GradScaler(policy.device_type)``), else None."""
    return policy.scaler(torch) if eager_mode(mode).startswith("amp_") else None


# ---------------------------------------------------------------- data and models


def _generator(torch, *parts):
    seed = zlib.crc32(json.dumps(parts).encode())
    return torch.Generator().manual_seed(seed)


def _teacher_labels(torch, features, n_classes: int, gen) -> Tensor:
    """Labels from a fixed random two-layer tanh network; logits are centred per class over the
    whole set so the classes come out roughly balanced."""
    n_in = features.shape[-1]
    hidden = 32
    w1 = torch.randn(n_in, hidden, generator=gen) / math.sqrt(n_in)
    b1 = 0.5 * torch.randn(hidden, generator=gen)
    w2 = torch.randn(hidden, n_classes, generator=gen) / math.sqrt(hidden)
    logits = torch.tanh(features @ w1 * 2.0 + b1) @ w2
    return (logits - logits.mean(0)).argmax(1)


def make_data(workload: str, amp_cfg: dict, seed: int, torch) -> tuple:
    """(x_train, y_train, x_test, y_test) on the CPU, fixed by (config seed, workload, data sizes).

    - mlp: x ~ N(0, I) with ``n_features`` features; label = teacher(x).
    - transformer: x is a sequence of ``seq_len`` N(0, I) tokens; the teacher pools the tokens with
      softmax attention weights from a fixed query (so which tokens matter depends on the tokens),
      label = teacher(pooled). Held-out examples come from the same distribution.
    - gpt: token sequences from a fixed random Markov chain (``workloads.gpt.make_corpus``), y the next tokens.
    - resnet: uint8 images, class template plus noise (``workloads.resnet.make_images``)."""
    if workload in training_workloads.PRESETS:
        gen = _generator(torch, "amp-data", seed, workload, _data_keys(amp_cfg, workload))
        sizes = training_workloads.sizes(workload, amp_cfg)
        if workload == "gpt":
            return training_workloads.gpt.make_corpus(sizes, amp_cfg["gpt"], gen, torch)[:4]
        return training_workloads.resnet.make_images(sizes, amp_cfg["resnet"], gen, torch)
    d = amp_cfg["data"]
    n = d["n_train"] + d["n_test"]
    gen = _generator(torch, "amp-data", seed, workload, d)
    if workload == "mlp":
        x = torch.randn(n, d["n_features"], generator=gen)
        y = _teacher_labels(torch, x, d["n_classes"], gen)
    elif workload == "transformer":
        seq_len = amp_cfg["transformer"]["seq_len"]
        x = torch.randn(n, seq_len, d["n_features"], generator=gen)
        query = torch.randn(d["n_features"], generator=gen)
        weights = torch.softmax(x @ query / math.sqrt(d["n_features"]) * 2.0, dim=1)  # (n, seq_len)
        pooled = (weights.unsqueeze(-1) * x).sum(1) * math.sqrt(seq_len)
        y = _teacher_labels(torch, pooled, d["n_classes"], gen)
    else:
        raise ValueError(f"amp.workloads: unknown {workload!r}; allowed: {', '.join(WORKLOADS)}")
    tr = d["n_train"]
    return x[:tr].contiguous(), y[:tr].contiguous(), x[tr:].contiguous(), y[tr:].contiguous()


def build_mlp(amp_cfg: dict, torch):
    """``layers`` hidden Linear+ReLU layers of width ``hidden``, then a linear classifier head."""
    nn = torch.nn
    d, c = amp_cfg["data"], amp_cfg["mlp"]
    dims = [d["n_features"]] + [c["hidden"]] * c["layers"]
    layers = []
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(dims[-1], d["n_classes"]))


def build_transformer(amp_cfg: dict, torch):
    """A small encoder classifier: input projection + learned positions, ``layers`` x
    ``nn.TransformerEncoderLayer(batch_first=True, dropout=0)``, mean pooling over the sequence, linear head.
    Dropout is off so the modes differ in precision only."""
    nn = torch.nn
    d, c = amp_cfg["data"], amp_cfg["transformer"]

    class EncoderClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(d["n_features"], c["d_model"])
            self.position = nn.Parameter(0.02 * torch.randn(c["seq_len"], c["d_model"]))
            layer = nn.TransformerEncoderLayer(c["d_model"], c["n_heads"], c["ff"], dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, c["layers"], enable_nested_tensor=False)
            self.head = nn.Linear(c["d_model"], d["n_classes"])

        def forward(self, x):
            h = self.encoder(self.embed(x) + self.position)
            return self.head(h.mean(dim=1))

    return EncoderClassifier()


def _data_keys(amp_cfg: dict, workload: str) -> dict:
    """What a gpt or resnet data set is drawn from: its section without the trial keys (steps, batch, lr)."""
    return {k: v for k, v in sorted(amp_cfg[workload].items()) if k not in TRIAL_KEYS}


def loss_floor(workload: str, amp_cfg: dict, seed: int, torch) -> float:
    """The lowest mean loss a model can reach on the workload's data, where it is known: the gpt corpus's
    entropy rate in nats/token (the chain is the first thing drawn from the data's generator); else NaN."""
    if workload != "gpt":
        return math.nan
    g = training_workloads.gpt
    gen = _generator(torch, "amp-data", seed, workload, _data_keys(amp_cfg, workload))
    successors, probs = g.markov_chain(
        training_workloads.sizes("gpt", amp_cfg)["vocab_size"], amp_cfg["gpt"]["markov_branching"], gen, torch
    )
    return g.entropy_rate(successors, probs, torch)


# workload -> model builder(amp_cfg, torch); tests may substitute one
WORKLOADS = {
    "mlp": build_mlp,
    "transformer": build_transformer,
    "gpt": lambda cfg, torch: training_workloads.build("gpt", cfg, torch),
    "resnet": lambda cfg, torch: training_workloads.build("resnet", cfg, torch),
}
# the keys a workload's own section may set for its trials (None there: the amp.* value)
TRIAL_KEYS = ("steps", "warmup_steps", "batch_size", "lr")


def workload_config(amp_cfg: dict, workload: str) -> dict:
    """``amp_cfg`` with the workload section's trial keys (``amp.gpt.steps``, ...) over the stage's."""
    own = amp_cfg.get(workload) if workload in training_workloads.PRESETS else None
    if not isinstance(own, dict):
        return amp_cfg
    return {**amp_cfg, **{k: own[k] for k in TRIAL_KEYS if own.get(k) is not None}}


_FLOPS_CACHE: dict = {}


def step_flops(workload: str, amp_cfg: dict, batch: int, torch) -> tuple[float, float]:
    """(FlopCounterMode's count, the analytic count) of one training step of ``batch`` examples; the
    analytic count only for gpt and resnet (NaN otherwise); NaN where the count fails."""
    key = (
        workload,
        batch,
        json.dumps(amp_cfg.get(workload), sort_keys=True, default=str),
        json.dumps(amp_cfg.get("data"), sort_keys=True),
    )
    if key not in _FLOPS_CACHE:
        analytic = (
            training_workloads.analytic_flops(workload, amp_cfg, batch)
            if workload in training_workloads.PRESETS
            else math.nan
        )
        try:
            if workload in training_workloads.PRESETS:
                counted = training_workloads.model_flops(workload, amp_cfg, batch, torch)
            else:
                counted = math.nan
        except Exception:  # a count is a convenience: no count, no MFU, the trial still runs
            counted = math.nan
        _FLOPS_CACHE[key] = (counted, analytic)
    return _FLOPS_CACHE[key]


def batch_order(
    n_train: int, batch_size: int, steps: int, seed: int, torch, *, rank: int = 0, world_size: int = 1
) -> Tensor:
    """(steps, batch_size) example indices on the host: shuffled epochs of global batches
    (``batch_size`` x ``world_size``) from a generator seeded by ``seed`` alone, so every mode of a seed sees
    the same batches in the same order (last partial batch dropped); rank ``rank`` of a DDP world gets its
    slice of each global batch, and the slices of all ranks make up what one process would see."""
    gen = torch.Generator().manual_seed(seed)
    global_batch = batch_size * world_size
    per_epoch = n_train // global_batch
    epochs = -(-steps // per_epoch)
    idx = torch.cat([torch.randperm(n_train, generator=gen)[: per_epoch * global_batch] for _ in range(epochs)])
    order = idx[: steps * global_batch].view(steps, global_batch)
    return order[:, rank * batch_size : (rank + 1) * batch_size].contiguous() if world_size > 1 else order


# ---------------------------------------------------------------- one trial


@dataclass(frozen=True)
class Replica:
    """How one process takes part in a data-parallel trial (``stages/scaling.py``).

    ``wrap`` turns the built model into the parallel one (``DistributedDataParallel``, ``nn.DataParallel``);
    with ``world_size`` ranks every step draws one *global* batch of ``world_size`` x ``amp.batch_size``
    examples from the same seeded order as a single process would, and rank ``rank`` trains on its slice;
    ``mean_loss`` turns this rank's loss tensor into the mean over all ranks (an all-reduce), read after the
    step's clock has stopped. A single process with ``nn.DataParallel`` is ``rank=0, world_size=1``."""

    rank: int = 0
    world_size: int = 1
    wrap: Callable | None = None
    mean_loss: Callable | None = None


@dataclass(frozen=True)
class Trial:
    backend: str  # name
    device: str
    device_name: str
    workload: str
    mode: str
    seed: int


def run_trial(
    trial: Trial,
    amp_cfg: dict,
    data: tuple,
    policy: AmpPolicy,
    *,
    backend: Backend,
    threads: int,
    steps_out: list,
    replica: Replica | None = None,
) -> dict:
    """Train one model in one mode; append a row per step to ``steps_out``; return the trial row.

    With ``replica`` this process is one rank of a data-parallel trial (see ``Replica``); the rows then
    hold the mean loss over ranks and ``samples_per_s`` counts the global batch.
    Exceptions propagate (the caller records them); steps finished before one stay in ``steps_out``."""
    torch = backend.torch
    sync = backend.synchronizer(trial.device)
    device, mode = trial.device, trial.mode
    n_steps, warmup = amp_cfg["steps"], amp_cfg["warmup_steps"]
    batch = amp_cfg["batch_size"]
    key = {
        "backend": trial.backend,
        "device": device,
        "device_name": trial.device_name,
        "workload": trial.workload,
        "mode": mode,
        "seed": trial.seed,
    }
    replica = replica or Replica()
    world = replica.world_size
    x_tr, y_tr, x_te, y_te = (t.to(device) for t in data)
    # The batch order stays on the host: each step's row of indices is picked there and moved to the device.
    # Indexing a device tensor with the step number would put a new constant into XLA's traced graph at
    # every step (one compilation per step, timed as training); a moved index tensor is data, not graph.
    # Under DDP every rank takes its own slice of the global batch.
    order = batch_order(len(y_tr), batch, n_steps, trial.seed, torch, rank=replica.rank, world_size=world)
    torch.manual_seed(trial.seed)
    model = WORKLOADS[trial.workload](amp_cfg, torch).to(device)
    if replica.wrap is not None:
        model = replica.wrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=amp_cfg["lr"])
    scaler = grad_scaler(mode, policy, torch)
    if is_compiled(mode):
        model = compile_model(model, torch)
    amp_dtype = policy.dtype if eager_mode(mode).startswith("amp_") else "float32"
    timer = timeit.default_timer
    losses, times = [], []
    skipped_steps, scale, status, detail = 0, (scaler.get_scale() if scaler else math.nan), "ok", ""

    with backend.float32_math(eager_mode(mode) == "tf32") as allow_tf32:
        per_trial_mem = backend.reset_peak_memory(device)
        model.train()
        for step in range(n_steps):
            idx = order[step].to(device)
            sync()
            t0 = timer()
            with autocast_context(mode, policy, torch):
                logits = model(x_tr[idx])  # (batch, classes), or (batch, seq, vocab) for gpt
                loss = F.cross_entropy(logits.float().flatten(0, -2), y_tr[idx].flatten())
            opt.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            sync()
            step_s = timer() - t0
            loss_value = float(replica.mean_loss(loss.detach())) if replica.mean_loss else float(loss.detach())
            step_scale, skipped = scale, False
            if scaler is not None:
                scale = float(scaler.get_scale())
                skipped = scale < step_scale  # the scaler lowers its scale exactly when it skips a step
                skipped_steps += skipped
            losses.append(loss_value)
            times.append(step_s)
            finite = math.isfinite(loss_value)
            if not finite:
                status, detail = "nan", f"loss {loss_value} at step {step}"
            steps_out.append(
                {
                    **key,
                    "step": step,
                    "loss": loss_value,
                    "step_s": step_s,
                    "scale": step_scale,
                    "skipped": skipped,
                    "warmup": step < warmup,
                    "status": status,
                    "status_detail": detail,
                }
            )
            if not finite:
                break

        test_acc = test_loss = math.nan
        if status == "ok":
            model = getattr(model, "_orig_mod", model)  # a compiled model's module: no recompile for eval
            model.eval()
            correct, loss_sum = 0, 0.0
            with torch.no_grad(), autocast_context(mode, policy, torch):
                for i in range(0, len(y_te), batch):  # the training batch: a compiled model keeps its shapes
                    logits = model(x_te[i : i + batch]).float().flatten(0, -2)
                    target = y_te[i : i + batch].flatten()
                    correct += int((logits.argmax(1) == target).sum())
                    loss_sum += float(F.cross_entropy(logits, target, reduction="sum"))
            test_acc, test_loss = correct / y_te.numel(), loss_sum / y_te.numel()
        peak_bytes, mem_kind = backend.peak_memory(device, per_trial=per_trial_mem)

    steady = np.asarray(times[warmup:], float)
    median_s = float(np.median(steady)) if len(steady) else math.nan
    iqr_s = float(np.subtract(*np.percentile(steady, [75, 25]))) if len(steady) else math.nan
    step_ci = blocks.median_interval(steady)  # batch means over the steps in time order, or descriptive
    majority = float(np.bincount(data[3].numpy().ravel()).max() / data[3].numel())
    samples_per_s = batch * world / median_s if median_s > 0 else math.nan
    per_example = (
        training_workloads.items_per_example(trial.workload, amp_cfg)
        if trial.workload in training_workloads.PRESETS
        else 1
    )
    counted, analytic = step_flops(trial.workload, amp_cfg, batch, torch)
    return {
        **key,
        "amp_dtype": amp_dtype,
        "allow_tf32": bool(allow_tf32),
        "step_median_s": median_s,
        "step_iqr_s": iqr_s,
        "step_ci95_low_s": step_ci.low,
        "step_ci95_high_s": step_ci.high,
        "step_ci_method": step_ci.method,
        "step_lag1_autocorr": step_ci.lag1_autocorr,
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * per_example if trial.workload == "gpt" else math.nan,
        "images_per_s": samples_per_s if trial.workload == "resnet" else math.nan,
        "model_flops_per_step": counted * world,
        "analytic_flops_per_step": analytic * world,
        "model_tflops_per_s": counted * world / median_s / 1e12 if median_s > 0 else math.nan,
        "compile_s": (times[0] - median_s if is_compiled(mode) and times and median_s > 0 else math.nan),
        "peak_mem_bytes": peak_bytes,
        "mem_kind": mem_kind,
        "first_loss": losses[0] if losses else math.nan,
        "final_loss": float(np.mean(losses[-FINAL_LOSS_STEPS:])) if losses else math.nan,
        "test_loss": test_loss,
        "test_acc": test_acc,
        "majority_acc": majority,
        "skipped_steps": skipped_steps if scaler is not None else 0,
        "final_scale": scale,
        "threads": threads,
        "steps": len(losses),
        "warmup_steps": warmup,
        "batch_size": batch,
        "status": status,
        "status_detail": detail,
    }


def run_trial_safely(
    trial: Trial,
    amp_cfg: dict,
    data: tuple,
    policy: AmpPolicy,
    *,
    backend: Backend,
    threads: int,
    steps_out: list,
    replica: Replica | None = None,
) -> dict:
    """``run_trial``, with any exception recorded as this trial's status (``oom`` or ``error``)."""
    try:
        return run_trial(
            trial, amp_cfg, data, policy, backend=backend, threads=threads, steps_out=steps_out, replica=replica
        )
    except Exception as exc:  # one failed trial must not stop the others
        oom = backend.is_oom(exc)
        compile_failed = not oom and is_compiled(trial.mode) and is_compile_error(exc)
        if oom:
            with contextlib.suppress(Exception):
                backend.empty_cache(trial.device)
        return {
            "backend": trial.backend,
            "device": trial.device,
            "device_name": trial.device_name,
            "workload": trial.workload,
            "mode": trial.mode,
            "seed": trial.seed,
            "amp_dtype": policy.dtype if eager_mode(trial.mode).startswith("amp_") else "float32",
            "threads": threads,
            "steps": sum(1 for s in steps_out if s["mode"] == trial.mode),
            **(
                {"status": "compile_error", "status_detail": compile_reason(exc)}
                if compile_failed
                else {"status": "oom" if oom else "error", "status_detail": first_line(exc)}
            ),
        }


def trial_telemetry(window: dict, row: dict) -> dict:
    """A trial's telemetry columns from its window's (``measure.telemetry.summarize``): those and its
    samples per joule (samples/s of the steady steps / the window's mean power, energy / duration)."""
    out = {k: v for k, v in window.items() if k not in ("clock_settled", "clock_halves_mhz")}
    start, end = window.get("telemetry_start_unix_s"), window.get("telemetry_end_unix_s")
    duration = end - start if start is not None and end is not None else None
    rate = row.get("samples_per_s") if row.get("status") == "ok" else None
    out["samples_per_j"] = tm.per_joule(rate, window.get("energy_j"), duration)
    return out


# ---------------------------------------------------------------- batch size and MFU


def find_max_batch(fits: Callable[[int], bool], limit: int, start: int = 1) -> int:
    """The largest batch in 1 .. ``limit`` for which ``fits(batch)`` holds (False: out of memory), assuming
    that a batch that fits means every smaller one does: doubling from ``start`` until one does not fit (or
    ``limit``), then bisecting between the last that fit and the first that did not. 0 when none fits."""
    lo, hi = 0, None  # lo fits (0: none yet), hi does not
    b = max(1, min(start, limit))
    while True:
        if fits(b):
            lo = b
            if b >= limit:
                return b
            b = min(limit, 2 * b)
        else:
            hi = b
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


PROBE_STEPS = 2  # training steps a probed batch must survive (the second holds the optimizer's state)


def choose_batch(
    wl_cfg: dict, workload: str, mode: str, data: tuple, policy: AmpPolicy, backend: Backend, device: str, log=print
) -> tuple[int, str]:
    """(batch, how it was chosen): the configured batch (``fixed``), or with ``batch_size: max`` the largest
    that trains ``PROBE_STEPS`` steps without running out of memory, up to the training set (``max``)."""
    if wl_cfg["batch_size"] != "max":
        return int(wl_cfg["batch_size"]), "fixed"
    limit = len(data[1])

    def fits(batch: int) -> bool:
        probe_cfg = {**wl_cfg, "batch_size": batch, "steps": PROBE_STEPS, "warmup_steps": 0}
        trial = Trial(backend.name, device, device, workload, mode, 0)
        try:
            run_trial(trial, probe_cfg, data, policy, backend=backend, threads=0, steps_out=[])
            return True
        except Exception as exc:
            if not backend.is_oom(exc):
                raise
            with contextlib.suppress(Exception):
                backend.empty_cache(device)
            return False

    found = find_max_batch(fits, limit)
    log(f"amp {device} {workload} {mode}: batch_size max -> {found} (limit {limit}: the training set)")
    if found < 1:
        raise RuntimeError(f"amp.{workload}.batch_size: max found no batch that fits in memory")
    return found, "max"


def training_columns(
    row: dict, backend: Backend, info: dict, policy: AmpPolicy, threads: int, floor: float, amp_cfg: dict, workload: str
) -> dict:
    """The row's preset, peak TFLOP/s for its precision (``Backend.peak_tflops``), MFU = model FLOPs per second
    (FlopCounterMode's count) / that peak, and the loss floor of its data."""
    dtype = peak_dtype(row["mode"], policy)
    try:
        peak, source = backend.peak_tflops(info, dtype, threads)
    except Exception as exc:
        peak, source = None, f"unknown ({first_line(exc)})"
    achieved = row.get("model_tflops_per_s", math.nan)
    mfu = 100 * achieved / peak if peak and isinstance(achieved, float) and math.isfinite(achieved) else math.nan
    preset = training_workloads.sizes(workload, amp_cfg)["preset"] if workload in training_workloads.PRESETS else ""
    return {
        "preset": preset,
        "peak_dtype": dtype,
        "peak_tflops": float(peak) if peak else math.nan,
        "peak_source": str(source),
        "mfu_pct": mfu,
        "loss_floor_nats": floor,
    }


# ---------------------------------------------------------------- one backend

CHECKPOINT_KEY = ("config_hash", "device", "workload", "mode", "seed")


def run_backend(st, *, checkpoint=None, log=print) -> tuple[list, list, dict]:
    """Every trial of the started stage ``st`` (``common.StageStart``): (steps rows, trials rows, AMP
    notes per device). Rows carry the device columns (warm-up included), not the provenance."""
    backend, run_info = st.backend, st.run_info
    amp_cfg = run_info["config"]["amp"]
    policy = backend.amp_policy(amp_cfg["dtype"])
    unsupported = backend.amp_support(policy)
    steps, trials, notes = [], [], {}
    no_compile = compile_support(backend) if amp_cfg.get("compile") else ""
    config_seed = run_info["config"].get("seed", 0)
    for device in st.devices:
        info = st.info(device)
        notes[device] = backend.amp_note(info, policy.dtype)
        dev = None  # the device's columns; it is warmed just before its first trial that is not resumed
        for workload in amp_cfg["workloads"]:
            data = make_data(workload, amp_cfg, config_seed, backend.torch)
            wl_cfg = workload_config(amp_cfg, workload)
            floor = loss_floor(workload, amp_cfg, config_seed, backend.torch)
            batches: dict = {}  # mode -> (batch, how it was chosen), once per device and workload
            modes = modes_for(backend, policy, info, compiled=compiles(amp_cfg, workload))
            for seed in amp_cfg["seeds"]:
                for mode in modes:  # modes interleaved within a seed: drift hits them alike
                    trial = Trial(backend.name, device, str(info.get("name", device)), workload, mode, seed)
                    ck_key = (run_info["config_hash"], device, workload, mode, seed)
                    if checkpoint is not None and ck_key in checkpoint:  # as measured then, warm-up included
                        done = checkpoint.rows[checkpoint.key(dict(zip(checkpoint.key_fields, ck_key)))]
                        steps += done["steps"]
                        trials.append(done["trial"])
                        continue
                    if dev is None:
                        dev = {k: v for k, v in st.device_row(device).items() if k not in st.prov}
                    trial_steps: list = []
                    why_not = (unsupported if eager_mode(mode).startswith("amp_") else "") or (
                        no_compile if is_compiled(mode) else ""
                    )
                    if why_not:  # a version floor or no C++ compiler for inductor: never run, said why
                        row = {
                            "backend": trial.backend,
                            "device": device,
                            "device_name": trial.device_name,
                            "workload": workload,
                            "mode": mode,
                            "seed": seed,
                            "amp_dtype": policy.dtype if eager_mode(mode).startswith("amp_") else "float32",
                            "threads": st.threads,
                            "steps": 0,
                            "status": "unsupported",
                            "status_detail": why_not,
                        }
                    else:
                        probe = eager_mode(mode)  # a compiled mode trains the batch its eager mode found
                        if probe not in batches:
                            try:
                                batches[probe] = choose_batch(
                                    wl_cfg, workload, probe, data, policy, backend, device, log
                                )
                            except Exception as exc:  # this mode's trials fail with the reason; others go on
                                batches[probe] = (0, f"batch search failed: {first_line(exc)}")
                        batch, how = batches[probe]
                        if batch:
                            trial_cfg = {**wl_cfg, "batch_size": batch}
                            with st.telemetry(device).window() as window:  # what the device did during the trial
                                row = run_trial_safely(
                                    trial,
                                    trial_cfg,
                                    data,
                                    policy,
                                    backend=backend,
                                    threads=st.threads,
                                    steps_out=trial_steps,
                                )
                            row.update(trial_telemetry(window.columns(), row))
                            row.update(batch_search=how)
                        else:
                            row = {
                                "backend": trial.backend,
                                "device": device,
                                "device_name": trial.device_name,
                                "workload": workload,
                                "mode": mode,
                                "seed": seed,
                                "threads": st.threads,
                                "steps": 0,
                                "status": "error",
                                "status_detail": how,
                                "batch_search": "max",
                            }
                    row.update(training_columns(row, backend, info, policy, st.threads, floor, amp_cfg, workload))
                    log(
                        f"amp {device} {workload} {mode} seed={seed}: {row['status']} "
                        f"step={row.get('step_median_s', math.nan) * 1e3:.3g} ms acc={row.get('test_acc', math.nan):.3f}"
                        + (f" ({row['status_detail']})" if row.get("status_detail") else "")
                    )
                    trial_steps = [{**dev, **r} for r in trial_steps]
                    row = {**dev, **row}
                    steps += trial_steps
                    trials.append(row)
                    if checkpoint is not None and row["status"] in ("ok", "nan"):  # errors are retried
                        checkpoint.add({**dict(zip(checkpoint.key_fields, ck_key)), "trial": row, "steps": trial_steps})
    return steps, trials, notes


# ---------------------------------------------------------------- CLI


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("amp", args.run_file, args.backend, args.threads)
    amp_cfg = st.config["amp"]
    check_amp_config(amp_cfg)
    if not st.devices:
        absent = st.absent_row()
        steps, trials = [dict(absent)], [dict(absent)]
        summary_df = pd.DataFrame([{**absent, "verdict": f"No verdict: {st.absent_reason}", "note": st.absent_reason}])
    else:
        checkpoint = Checkpoint(st.checkpoint_path(args.out_dir, args.checkpoint), CHECKPOINT_KEY)
        steps, trials, notes = run_backend(st, checkpoint=checkpoint)
        steps = [{**st.prov, **r} for r in steps]
        trials = [{**st.prov, **r} for r in trials]
        summary_df = summarize_trials(pd.DataFrame(trials), amp_cfg["accuracy_tolerance"], notes)
        for k, v in st.prov.items():
            summary_df[k] = v
    atomic_write_csv(st.out_path(args.out_dir, "amp_steps"), pd.DataFrame(steps, columns=STEPS_COLUMNS))
    atomic_write_csv(st.out_path(args.out_dir, "amp_trials"), pd.DataFrame(trials, columns=TRIALS_COLUMNS))
    atomic_write_csv(st.out_path(args.out_dir, "amp_summary"), summary_df.reindex(columns=SUMMARY_COLUMNS))
    atomic_write_csv(st.out_path(args.out_dir, "telemetry_amp"), st.telemetry_rows(), columns=SERIES_COLUMNS)
    st.write_samples(
        args.out_dir,
        sample_table.from_series_rows(  # every step's time, per trial
            "amp_trials", steps, index="step", value="step_s", steady=lambda r: not r.get("warmup")
        ),
    )
    for r in summary_df.reindex(columns=SUMMARY_COLUMNS).itertuples():
        print(f"{r.workload}: {r.verdict}" + (f" Note: {r.note}" if isinstance(r.note, str) and r.note else ""))
    return 0
