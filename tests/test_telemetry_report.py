"""What the report says about what the devices were doing: throttling warnings in the summary (from the
fixture's planted hw_thermal points and sw_power_cap trial), the missing-sensor note with its reasons, the
energy-efficiency columns, the soak's boost against sustained readings, and the telemetry figures; every
number recomputed from the fixture's CSVs."""

from __future__ import annotations

import pandas as pd
import pytest

from accelbench.reporting import tables as S
from accelbench.reporting.plots import load_tables
from fixture_runs import make_pre_telemetry, write_cpu_run
from test_plots import svg_text
from test_report import parse, raw_table


def test_planted_throttling_is_a_warning_in_the_summary(fixtures):
    built = fixtures("two_runs")
    els = parse(built["report"].read_text())
    warnings = [
        e
        for e in els
        if e["section"] == "summary"
        and e["tag"] == "li"
        and "data-device" in e["attrs"]
        and "data-dtype" not in e["attrs"]
    ]  # the throttling warnings, not the published-reference lines
    mm = raw_table(built["results"], "matmul_*.csv")
    trials = raw_table(built["results"], "amp_*_trials.csv")
    cuda = mm[mm["device"] == "cuda:0"]
    throttled = cuda[cuda["throttled"].map(S.as_bool).eq(True)]
    assert len(throttled) == 2 and set(throttled["throttle_reasons"]) == {"hw_thermal"}
    (w,) = [w for w in warnings if w["attrs"]["data-device"] == "cuda:0"]
    assert w["attrs"]["data-run"] == "gpu-node-h100" and "bad" in w["attrs"]["class"]
    assert f"2/{cuda['throttled'].notna().sum()} matmul points" in w["text"]
    n_trials = (trials["device"] == "cuda:0").sum()
    assert f"1/{n_trials} AMP trials" in w["text"] and "hw_thermal, sw_power_cap" in w["text"]
    assert f"1/{cuda['clock_ramp'].notna().sum()} points before the clock settled" in w["text"]
    assert len(warnings) == 1  # the CPUs neither throttled nor ramped
    # every throttled point carries the tag in the table of every point
    tags = [e for e in els if e["section"] == "points" and e["tag"] == "span" and "throttled" in e["text"]]
    assert len(tags) == 2 and all("hw_thermal" in t["text"] for t in tags)


def test_missing_sensors_are_named_with_why(fixtures):
    built = fixtures("two_runs")
    els = parse(built["report"].read_text())
    rows = {
        (e["attrs"]["data-run"], e["attrs"]["data-device"]): e
        for e in els
        if e["section"] == "telemetry"
        and e["tag"] == "tr"
        and "data-run" in e["attrs"]
        and ("cpu_sysfs" in e["text"] or "nvml" in e["text"])
    }  # the sensor rows, not the soak's
    laptop = rows[("laptop-cpu", "cpu")]
    assert "energy: RAPL" in laptop["text"] and "readable by root only" in laptop["text"]
    assert "power:" in laptop["text"] and "throttle reasons:" in laptop["text"]
    assert "memory clock" not in laptop["text"]  # never exposed on a CPU: not worth a line
    h100 = rows[("gpu-node-h100", "cuda:0")]
    assert "nvml" in h100["text"] and "energy:" not in h100["text"]
    # the laptop's energy columns are null (never 0), so its GFLOP/J cells are dashes
    mm = raw_table(built["results"], "matmul_*.csv")
    laptop_rows = mm[mm["run_id"] == "laptop-cpu"]
    assert laptop_rows["energy_j"].isna().all() and laptop_rows["gflop_per_j"].isna().all()
    assert laptop_rows["clock_mhz_median"].notna().all()


def test_energy_efficiency_columns_are_the_fixture_numbers(fixtures):
    built = fixtures("two_runs")
    html = built["report"].read_text()
    mm = raw_table(built["results"], "matmul_*.csv")
    best = mm[(mm["device"] == "cuda:0") & (mm["dtype"] == "float8_e4m3fn") & (mm["n"] == 16384)].iloc[0]
    assert best["gflop_per_j"] == pytest.approx(best["tflops"] * 1e3 / 640.0)
    assert S.fmt_num(best["gflop_per_j"]) in html
    trials = raw_table(built["results"], "amp_*_trials.csv")
    g = trials[(trials["device"] == "cuda:0") & (trials["workload"] == "mlp") & (trials["mode"] == "amp_fp16")]
    els = parse(html)
    amp_rows = [
        e
        for e in els
        if e["section"] == "amp"
        and e["tag"] == "tr"
        and "gpu-node-h100 · cuda:0" in e["text"]
        and "mlp" in e["text"]
        and "amp_fp16" in e["text"]
    ]
    assert any(S.fmt_num(g["samples_per_j"].mean()) in r["text"] for r in amp_rows)
    assert "samples/J" in html and "GFLOP/J" in html


def test_soak_boost_against_sustained(fixtures):
    built = fixtures("two_runs")
    els = parse(built["report"].read_text())
    (row,) = [
        e
        for e in els
        if e["section"] == "telemetry" and e["tag"] == "tr" and "data-device" in e["attrs"] and "FP8" in e["text"]
    ]
    soak = raw_table(built["results"], "matmul_soak_*.csv")
    ok = soak[soak["status"] == "ok"].sort_values("interval")
    settled = ok[ok["clock_settled"].map(S.as_bool).eq(True)]
    assert S.fmt_num(ok["tflops"].iloc[0]) in row["text"] and S.fmt_num(settled["tflops"].median()) in row["text"]
    assert "6.00 s" in row["text"]  # settled from the 7th one-second interval on
    summary = S.soak_summary(load_tables(built["aggregate"])["matmul_soak"])
    (s,) = summary.to_dict("records")
    assert s["sustained_tflops"] / s["boost_tflops"] == pytest.approx(0.91)
    assert s["throttled"] is True and s["reasons"] == "sw_power_cap" and s["settled_at_s"] == pytest.approx(6.0)


def test_telemetry_figures(fixtures):
    plots = fixtures("two_runs")["plots"]
    strip = svg_text(plots / "telemetry.svg")
    for text in (
        "clock (MHz)",
        "power (W)",
        "temperature (°C)",
        "throttled",
        "clock not settled (clock_ramp)",
        "laptop-cpu · cpu Ryzen 7 5800U",
        "gpu-node-h100 · cuda:0 H100 80GB HBM3",
    ):
        assert text in strip, text
    assert "no power reading on this device" in strip  # the laptop: said in words, not drawn as 0
    soak = svg_text(plots / "matmul_soak.svg")
    assert "clock settled" in soak and "TFLOP/s per interval" in soak
    assert "No soak was run" in svg_text(fixtures("cpu_only")["plots"] / "matmul_soak.svg")
    assert "No telemetry was recorded" in svg_text(fixtures("empty")["plots"] / "telemetry.svg")


def test_cpu_only_report_has_no_throttle_warning_and_says_why_sensors_are_missing(fixtures):
    html = fixtures("cpu_only")["report"].read_text()
    assert 'id="summary-warnings"' not in html  # the laptop's throttling is unknown, not "throttled"
    assert "readable by root only" in html


def test_a_report_of_a_run_from_before_telemetry(tmp_path):
    from accelbench.cli import main

    results = tmp_path / "results"
    make_pre_telemetry(write_cpu_run(results))
    agg, plots, report = results / "aggregate", results / "plots", results / "report.html"
    assert main(["aggregate", "--results", str(results), "--out-dir", str(agg)]) == 0
    assert main(["plots", "--aggregate-dir", str(agg), "--out-dir", str(plots)]) == 0
    assert main(["report", "--aggregate-dir", str(agg), "--plots-dir", str(plots), "--out", str(report)]) == 0
    html = report.read_text()
    assert "devices.json written before telemetry existed" in html
    assert "No telemetry was recorded" in svg_text(plots / "telemetry.svg")
    assert pd.read_csv(agg / "matmul.csv")["clock_mhz_median"].isna().all()


def test_device_table_says_which_sensors_were_found_and_why_others_are_missing_in_words(fixtures):
    """The environment's device rows show the telemetry sampler's findings as text, not a raw dict dump."""
    from accelbench.reporting.html import telemetry_text

    html = fixtures("two_runs")["report"].read_text()
    assert "telemetry={" not in html and "{&#34;found&#34;" not in html and '{"found"' not in html
    assert "telemetry=cpu_sysfs at 20 Hz — found clock (cpu_sysfs clock)" in html
    assert "missing energy: RAPL" in html  # the reason, not cut
    text = telemetry_text(
        {"source": "nvml", "hz": 10.0, "found": {"power": "nvml power"}, "missing": {"temperature": "no sensor"}}
    )
    assert text == "nvml at 10 Hz — found power (nvml power) — missing temperature: no sensor"
    assert telemetry_text({"source": "off", "hz": 0, "found": {}, "missing": {}, "note": "off"}) == "off"
