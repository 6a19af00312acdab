"""accelbench plots: every declared figure as non-empty PNG and SVG, whatever the results hold; the
numbers behind the summary plots (best point, CPU speedup) and the per-device colours."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from accelbench.reporting import tables as S
from accelbench.reporting.plots import FIGURES, load_tables

RULE_PLOTS = [
    "matmul_tflops",
    "matmul_pct_of_peak",
    "speedup",
    "warmup",
    "transfer",
    "amp_step_time",
    "amp_loss",
    "scaling_efficiency",
    "collective_busbw",
    "peer_copy",
    "telemetry",
    "matmul_soak",
    "membw",
    "roofline",
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def svg_text(path) -> str:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    return " ".join(t.strip() for t in root.itertext() if t.strip())


def test_figure_names_match_the_rule():
    assert set(RULE_PLOTS) <= set(FIGURES)  # every figure the report had before plug-ins added more
    assert list(FIGURES) == list(dict.fromkeys(FIGURES))  # each declared once


@pytest.mark.parametrize("name", ["two_runs", "cpu_only", "empty"])
def test_every_figure_written_as_png_and_svg(fixtures, name):
    plots = fixtures(name)["plots"]
    for fig in FIGURES:
        png, svg = plots / f"{fig}.png", plots / f"{fig}.svg"
        assert png.read_bytes()[:8] == PNG_MAGIC, png
        assert png.stat().st_size > 5000, png
        assert svg.stat().st_size > 1000, svg
        svg_text(svg)  # well-formed XML with an <svg> root


def _png_size(path):
    data = path.read_bytes()
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_figures_show_data_with_units(fixtures):
    plots = fixtures("two_runs")["plots"]
    text = svg_text(plots / "matmul_tflops.svg")
    assert "TFLOP/s" in text and "matrix size n" in text
    for label in ("gpu-node-h100 · cuda:0 H100 80GB HBM3", "laptop-cpu · cpu Ryzen 7 5800U"):
        assert label in text
    assert "flagged: unstable" in text and "flagged: invalid (> peak)" in text
    assert "% of peak" in svg_text(plots / "matmul_pct_of_peak.svg")
    speedup = svg_text(plots / "speedup.svg")
    assert "speedup over CPU" in speedup and "No accelerator" not in speedup
    assert "GB/s" in svg_text(plots / "transfer.svg") and "pinned host memory" in svg_text(plots / "transfer.svg")
    assert "cold" in svg_text(plots / "warmup.svg")
    amp = svg_text(plots / "amp_step_time.svg")
    assert "amp_fp16" in amp and "2.40×" in amp  # the summary's speedup labels the bar
    assert "loss" in svg_text(plots / "amp_loss.svg")
    w, h = _png_size(plots / "matmul_tflops.png")
    assert 900 <= w <= 2400 and 300 <= h <= 2400


def test_cpu_only_figures_say_what_is_missing(fixtures):
    plots = fixtures("cpu_only")["plots"]
    assert "No accelerator measured" in svg_text(plots / "speedup.svg")
    assert "Transfer not measured" in svg_text(plots / "transfer.svg")
    assert "cpu Ryzen 7 5800U" in svg_text(plots / "matmul_tflops.svg")


def test_empty_results_give_placeholder_figures(fixtures):
    plots = fixtures("empty")["plots"]
    assert "No matmul point was measured" in svg_text(plots / "matmul_tflops.svg")
    assert "No AMP trial was measured" in svg_text(plots / "amp_step_time.svg")


def test_one_colour_per_run_and_device(fixtures):
    tables = load_tables(fixtures("two_runs")["aggregate"])
    series = S.series(tables)
    assert list(zip(series["run_id"], series["device"])) == [
        ("gpu-node-h100", "cpu"),
        ("gpu-node-h100", "cuda:0"),
        ("laptop-cpu", "cpu"),
    ]
    assert series["color"].is_unique
    assert all(lab.startswith(run + " · ") for lab, run in zip(series["label"], series["run_id"]))
    import seaborn as sns

    assert list(series["color"]) == sns.color_palette("colorblind", 3).as_hex()
    single = S.series(load_tables(fixtures("cpu_only")["aggregate"]))
    assert list(single["label"]) == ["cpu Ryzen 7 5800U"]  # no run prefix with one run


def test_best_tflops_ignores_untrustworthy_points():
    rows = [
        {
            "run_id": "r",
            "backend": "cuda",
            "device": "cuda:0",
            "device_name": "X",
            "dtype": "float16",
            "n": n,
            "tflops": t,
            "median_s": 1.0,
            "pct_of_peak": t / 10,
            "peak_tflops": 1000.0,
            "status": st,
        }
        for n, t, st in [
            (256, 1300.0, "invalid"),
            (512, 500.0, "ok"),
            (1024, 700.0, "unstable"),
            (2048, 900.0, "wrong_result"),
            (4096, float("nan"), "oom"),
        ]
    ]
    best = S.best_tflops(pd.DataFrame(rows))
    assert len(best) == 1
    assert best.iloc[0]["n"] == 1024 and best.iloc[0]["tflops"] == 700.0 and best.iloc[0]["status"] == "unstable"


def test_cpu_speedup_pairs_same_run_dtype_and_size():
    def row(run, backend, device, dtype, n, median_s, status="ok"):
        return {
            "run_id": run,
            "backend": backend,
            "device": device,
            "device_name": "",
            "dtype": dtype,
            "n": n,
            "median_s": median_s,
            "tflops": 2 * n**3 / median_s / 1e12,
            "status": status,
        }

    df = pd.DataFrame(
        [
            row("a", "cpu", "cpu", "float32", 512, 0.010),
            row("a", "cuda", "cuda:0", "float32", 512, 0.0005),
            row("a", "cuda", "cuda:1", "float32", 512, 0.0004),
            row("a", "cpu", "cpu", "float32", 1024, 0.080),
            row("a", "cuda", "cuda:0", "float32", 1024, 0.002, "invalid"),
            row("a", "cuda", "cuda:0", "bfloat16", 512, 0.0002),  # no CPU bfloat16: no speedup
            row("b", "cuda", "cuda:0", "float32", 512, 0.001),  # another run without a CPU: no speedup
        ]
    )
    sp = S.cpu_speedup(df)
    assert list(zip(sp["run_id"], sp["device"], sp["dtype"], sp["n"])) == [
        ("a", "cuda:0", "float32", 512),
        ("a", "cuda:1", "float32", 512),
    ]
    assert sp["speedup"].tolist() == pytest.approx([20.0, 25.0])
    assert S.cpu_speedup(df[df["backend"] == "cpu"]).empty


def test_number_formats():
    assert S.fmt_num(735.2) == "735" and S.fmt_num(1310.4) == "1,310" and S.fmt_num(0.21) == "0.210"
    assert S.fmt_num(float("nan")) == "—" and S.fmt_num(0.00087) == "0.000870"
    assert S.fmt_time(2.59e-5) == "25.9 µs" and S.fmt_time(0.00279) == "2.79 ms" and S.fmt_time(12.0) == "12.0 s"
    assert S.short_device_name("AMD EPYC 7V13 64-Core Processor") == "EPYC 7V13"
    assert S.short_device_name("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"


def _compared_point(table, verdict="same", **identity):
    return {
        "table": table,
        "backend": "cpu",
        "device": "cpu",
        "match": "both",
        "speed_change_pct": 3.0,
        "speed_change_ci95_low_pct": 1.0,
        "speed_change_ci95_high_pct": 5.0,
        "verdict": verdict,
        "label": f"{table} cpu",
        **identity,
    }


def test_comparison_figure_draws_from_the_tables_sweep_declarations(monkeypatch):
    """The panels come from Compare.sweep: the matmul sweep one panel per dtype against n; the points of tables
    without a sweep share one panel titled by their stages' sections; a sweep planted on another table gets its own
    panels (the figure names no table)."""
    import dataclasses

    import matplotlib.pyplot as plt
    import seaborn as sns

    from accelbench import registry
    from accelbench.plugin import Sweep
    from accelbench.reporting.plots import fig_comparison

    points = pd.DataFrame(
        [
            _compared_point("matmul", dtype="float32", n=256),
            _compared_point("matmul", dtype="float32", n=512),
            _compared_point("matmul", "slower", dtype="bfloat16", n=512),
            _compared_point("warmup", n=64),
            _compared_point("amp_trials"),
            _compared_point("membw", kernel="triad", size_bytes=2**20),
        ]
    )
    fig = fig_comparison(plt, sns, points, "a", "b", 0.05)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["matmul FP32", "matmul BF16", "Warm-up, AMP, Memory"], titles
    assert [ax.get_xlabel() for ax in fig.axes if ax.get_title()][0] == "matrix size n"
    plt.close(fig)

    membw = registry.TABLES["membw"]
    planted = dataclasses.replace(
        membw, compare=dataclasses.replace(membw.compare, sweep=Sweep("size_bytes", "array bytes", panel="kernel"))
    )
    monkeypatch.setitem(registry.TABLES, "membw", planted)
    fig = fig_comparison(plt, sns, points, "a", "b", 0.05)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["matmul FP32", "matmul BF16", "membw triad", "Warm-up, AMP"], titles
    plt.close(fig)
