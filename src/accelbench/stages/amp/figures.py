"""The AMP stage's figures (registry.FIGURES: their captions are workflow/report/<name>.rst)."""

from __future__ import annotations

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ...reporting import tables as S
from ...reporting.plots import _finish, _grid, _legend_below, _message, _plain_log_y, _wrap


def _mode_palette(sns, modes):
    order = ["fp32", "tf32", "amp_bf16", "amp_fp16"]
    modes = sorted(set(modes), key=lambda m: (order.index(m) if m in order else 99, m))
    colors = sns.color_palette("colorblind", 10).as_hex()
    fixed = {"fp32": colors[7], "tf32": colors[9], "amp_bf16": colors[2], "amp_fp16": colors[4]}
    return modes, {m: fixed.get(m, colors[(5 + i) % 10]) for i, m in enumerate(modes)}


def _loss_lines(sns, ax, d, modes, pal, lw: float) -> None:
    """One panel's loss curves, a line per mode (mean over seeds, the band their range); the FP32 baseline
    last, dashed, on top: where a mode tracks it exactly, both stay visible."""
    present = [m for m in modes if m in set(d["mode"]) and m != "fp32"] + (["fp32"] if "fp32" in set(d["mode"]) else [])
    sns.lineplot(
        data=d,
        x="step",
        y="loss",
        hue="mode",
        hue_order=present,
        style="mode",
        style_order=present,
        dashes={m: (4, 2) if m == "fp32" else "" for m in present},
        palette=pal,
        errorbar=("pi", 100),
        estimator="mean",
        lw=lw,
        ax=ax,
        legend=False,
    )


def fig_amp_step_time(plt, sns, tables, series):
    tr = tables["amp_trials"]
    title = "Training step time: FP32 vs AMP (mean of per-trial medians, 95% CI over seeds)"
    if tr is None or tr.empty or not (tr["step_median_s"] > 0).any():
        return _message(plt, title, "No AMP trial was measured.")
    tr = S.with_series(tr[tr["step_median_s"] > 0], series)
    tr["step_ms"] = tr["step_median_s"] * 1e3
    workloads = sorted(set(tr["workload"]))
    modes, pal = _mode_palette(sns, tr["mode"])
    labels = list(dict.fromkeys(series["label"][series["label"].isin(tr["label"])]))
    fig, axes = _grid(plt, len(workloads), ncols=2, panel_w=max(5.2, 1.6 * len(labels) + 2.2), panel_h=3.9)
    summ = S.amp_verdicts(tables["amp_summary"])
    summ = S.with_series(summ, series) if not summ.empty else summ
    for ax, workload in zip(axes, workloads):
        d = tr[tr["workload"] == workload]
        d = d.assign(label=d["label"].map(_wrap))
        sns.barplot(
            data=d,
            x="label",
            y="step_ms",
            hue="mode",
            order=[_wrap(x) for x in labels if _wrap(x) in set(d["label"])],
            hue_order=modes,
            palette=pal,
            errorbar=("ci", 95),
            n_boot=500,
            seed=0,
            capsize=0.08,
            err_kws={"linewidth": 1.2},
            ax=ax,
        )
        span = d["step_ms"].max() / d["step_ms"].min()
        log = span > 20  # devices far apart: a log axis keeps the fast one visible
        if log:
            _plain_log_y(ax)
        ax.set_title(f"workload: {workload}")
        ax.set_xlabel("")
        ax.set_ylabel("step time (ms, log scale)" if log else "step time (ms)")
        ax.tick_params(axis="x", labelsize=8)
        if ax.get_legend():
            ax.get_legend().remove()
        if not summ.empty:
            order = [_wrap(x) for x in labels if _wrap(x) in set(d["label"])]
            for _, r in summ[summ["workload"] == workload].iterrows():
                if _wrap(r["label"]) not in order or r["mode"] not in modes:
                    continue
                i = order.index(_wrap(r["label"]))
                k = modes.index(r["mode"])
                offset = (k - (len(modes) - 1) / 2) * 0.8 / len(modes)
                y = d[(d["label"] == _wrap(r["label"])) & (d["mode"] == r["mode"])]["step_ms"].max()
                if y == y:
                    ax.text(
                        i + offset,
                        y * 1.3 if log else y * 1.03,
                        f"{r['speedup']:.2f}×",
                        ha="center",
                        va="bottom",
                        fontsize=8,
                        fontweight="bold",
                    )
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 2.2) if log else ax.set_ylim(0, hi * 1.15)
    handles = [Patch(color=pal[m]) for m in modes]
    _legend_below(fig, handles, modes, ncol=len(modes))
    fig.suptitle(
        title + "\nlabels: speedup over FP32 from the summary", x=0.01, ha="left", fontweight="bold", fontsize=10
    )
    _finish(fig)
    return fig


def fig_amp_loss(plt, sns, tables, series):
    st = tables["amp_steps"]
    title = "Training loss per step: FP32 vs AMP (mean over seeds, band = min–max)"
    if st is None or st.empty or not st["loss"].notna().any():
        return _message(plt, title, "No AMP training steps were recorded.")
    st = S.with_series(st[st["loss"].notna()], series)
    labels = list(dict.fromkeys(series["label"][series["label"].isin(st["label"])]))
    workloads = sorted(set(st["workload"]))
    modes, pal = _mode_palette(sns, st["mode"])
    nrows, ncols = len(labels), len(workloads)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 2.7 * nrows + 0.9), squeeze=False, sharex=True)
    for i, label in enumerate(labels):
        for j, workload in enumerate(workloads):
            ax = axes[i][j]
            d = st[(st["label"] == label) & (st["workload"] == workload)]
            if d.empty:
                ax.axis("off")
                continue
            _loss_lines(sns, ax, d, modes, pal, lw=1.8)
            ax.set_title(f"{label} — {workload}", fontsize=9.5)
            ax.set_ylabel("loss")
            ax.set_xlabel("training step" if i == nrows - 1 else "")
    _legend_below(
        fig,
        [Line2D([0], [0], color=pal[m], lw=2, ls="--" if m == "fp32" else "-") for m in modes],
        modes,
        ncol=len(modes),
    )
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig)
    return fig


TRAINING_WORKLOADS = ("gpt", "resnet")


def fig_training_throughput(plt, sns, tables, series):
    """tokens/s (gpt) or images/s (resnet) per mode, one panel per workload; bars labelled with MFU."""
    tr = tables["amp_trials"]
    title = "Training throughput per mode (mean over seeds, 95% CI); labels: MFU against the precision's peak"
    if tr is None or tr.empty or "workload" not in tr.columns:
        return _message(plt, title, "No gpt or resnet trial was measured.")
    tr = tr[tr["workload"].isin(TRAINING_WORKLOADS) & (tr["status"] == "ok")].copy()
    if tr.empty:
        return _message(plt, title, "No gpt or resnet trial was measured (amp.workloads).")
    tr = S.with_series(tr, series)
    for col in ("tokens_per_s", "images_per_s", "mfu_pct"):
        tr[col] = tr[col].astype(float) if col in tr.columns else float("nan")
    tr["rate"] = tr["tokens_per_s"].where(tr["workload"] == "gpt", tr["images_per_s"])
    workloads = [w for w in TRAINING_WORKLOADS if w in set(tr["workload"])]
    modes, pal = _mode_palette(sns, tr["mode"])
    labels = list(dict.fromkeys(series["label"][series["label"].isin(tr["label"])]))
    fig, axes = _grid(plt, len(workloads), ncols=2, panel_w=max(5.2, 1.6 * len(labels) + 2.2), panel_h=3.9)
    for ax, workload in zip(axes, workloads):
        d = tr[tr["workload"] == workload]
        d = d.assign(label=d["label"].map(_wrap))
        order = [_wrap(x) for x in labels if _wrap(x) in set(d["label"])]
        present = [m for m in modes if m in set(d["mode"])]
        sns.barplot(
            data=d,
            x="label",
            y="rate",
            hue="mode",
            order=order,
            hue_order=present,
            palette=pal,
            errorbar=("ci", 95),
            n_boot=500,
            seed=0,
            capsize=0.08,
            err_kws={"linewidth": 1.2},
            ax=ax,
        )
        for i, label in enumerate(order):
            for k, mode in enumerate(present):
                g = d[(d["label"] == label) & (d["mode"] == mode)]
                mfu, y = g["mfu_pct"].mean(), g["rate"].mean()
                if y == y and mfu == mfu:
                    offset = (k - (len(present) - 1) / 2) * 0.8 / len(present)
                    ax.text(i + offset, y * 1.02, f"{mfu:.2g}%", ha="center", va="bottom", fontsize=7.5)
        preset = ", ".join(sorted(set(d["preset"].dropna().astype(str)))) if "preset" in d.columns else ""
        ax.set_title(f"workload: {workload}" + (f" ({preset})" if preset else ""))
        ax.set_xlabel("")
        ax.set_ylabel("tokens/s" if workload == "gpt" else "images/s")
        ax.tick_params(axis="x", labelsize=8)
        if ax.get_legend():
            ax.get_legend().remove()
        lo, hi = ax.get_ylim()
        ax.set_ylim(0, hi * 1.15)
    _legend_below(fig, [Patch(color=pal[m]) for m in modes], modes, ncol=min(len(modes), 6))
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=10)
    _finish(fig)
    return fig


def fig_training_loss(plt, sns, tables, series):
    """The gpt and resnet loss curves per mode; for gpt the corpus's known floor (its entropy rate) dotted."""
    st, tr = tables["amp_steps"], tables["amp_trials"]
    title = "Training loss of gpt and resnet per mode (mean over seeds); dotted: gpt's known loss floor"
    if st is None or st.empty or "workload" not in st.columns:
        return _message(plt, title, "No gpt or resnet training steps were recorded.")
    st = st[st["workload"].isin(TRAINING_WORKLOADS) & st["loss"].notna()]
    if st.empty:
        return _message(plt, title, "No gpt or resnet training steps were recorded (amp.workloads).")
    st = S.with_series(st, series)
    labels = list(dict.fromkeys(series["label"][series["label"].isin(st["label"])]))
    workloads = [w for w in TRAINING_WORKLOADS if w in set(st["workload"])]
    modes, pal = _mode_palette(sns, st["mode"])
    floors = {}
    if tr is not None and not tr.empty and "loss_floor_nats" in tr.columns:
        t = S.with_series(tr[tr["workload"] == "gpt"], series)
        for label, g in t.groupby("label"):
            v = g["loss_floor_nats"].astype(float).dropna()
            if len(v):
                floors[label] = float(v.mean())
    nrows, ncols = len(labels), len(workloads)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 2.7 * nrows + 0.9), squeeze=False, sharex=False)
    for i, label in enumerate(labels):
        for j, workload in enumerate(workloads):
            ax = axes[i][j]
            d = st[(st["label"] == label) & (st["workload"] == workload)]
            if d.empty:
                ax.axis("off")
                continue
            _loss_lines(sns, ax, d, modes, pal, lw=1.6)
            if workload == "gpt" and label in floors:
                ax.axhline(floors[label], color="black", ls=":", lw=1.2)
                ax.text(0, floors[label], f" floor {floors[label]:.3f} nats", va="bottom", fontsize=7.5)
            ax.set_title(f"{label} — {workload}", fontsize=9.5)
            ax.set_ylabel("loss (nats/token)" if workload == "gpt" else "loss")
            ax.set_xlabel("training step" if i == nrows - 1 else "")
    _legend_below(
        fig,
        [Line2D([0], [0], color=pal[m], lw=2, ls="--" if m == "fp32" else "-") for m in modes],
        modes,
        ncol=min(len(modes), 6),
    )
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig)
    return fig
