"""accelbench report: one self-contained page whose summary numbers are the fixture's numbers,
with every run compared, flagged points visible and explained, and incomplete data announced."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from accelbench import registry
from accelbench.reporting import tables as S
from accelbench.reporting.plots import FIGURES
from fixture_runs import add_absent_backend, write_cpu_run


class Elements(HTMLParser):
    """Every start tag with its attributes, its text, and the id of the section it is in."""

    def __init__(self):
        super().__init__()
        self.elements, self.stack, self.section = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.section = attrs.get("id")
        el = {"tag": tag, "attrs": attrs, "text": "", "section": self.section}
        self.elements.append(el)
        if tag not in ("img", "meta", "link", "br", "input"):
            self.stack.append(el)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for el in self.stack:
            el["text"] += data


def parse(html: str) -> list[dict]:
    p = Elements()
    p.feed(html)
    return p.elements


def raw_table(results, pattern: str, table: str | None = None) -> pd.DataFrame:
    """Every run's files matching ``pattern`` and of ``table`` (default: the table the pattern names, so
    matmul_*.csv is not matmul_soak_*.csv) read straight from the fixture's run folders, not through aggregate."""
    table = table or registry.table_of(pattern.replace("*", "cpu"))
    paths = [
        p
        for p in sorted(results.glob(f"*/{pattern}"))
        if (p.parent / "run.json").exists() and registry.table_of(p.name) == table
    ]
    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)


def raw_square(results) -> pd.DataFrame:
    """The square sweep's rows of every matmul file (not the named shapes, not the search)."""
    raw = raw_table(results, "matmul_*.csv", "matmul")
    return raw[raw["shape_name"].isna()]


def test_summary_best_tflops_are_the_fixture_numbers(fixtures):
    built = fixtures("two_runs")
    html = built["report"].read_text()
    els = parse(html)
    cells = [e for e in els if e["section"] == "summary" and "data-tflops" in e["attrs"]]
    raw = raw_square(built["results"])
    trusted = raw[raw["status"].isin(["ok", "unstable"])]
    expected = trusted.loc[trusted.groupby(["run_id", "device", "dtype"])["tflops"].idxmax()]
    assert len(cells) == len(expected) == 11
    got = {(c["attrs"]["data-run"], c["attrs"]["data-device"], c["attrs"]["data-dtype"]): c for c in cells}
    for _, r in expected.iterrows():
        cell = got[(r["run_id"], r["device"], r["dtype"])]
        assert float(cell["attrs"]["data-tflops"]) == pytest.approx(r["tflops"], rel=1e-9)
        assert S.fmt_num(r["tflops"]) in cell["text"]
        if r["pct_of_peak"] == r["pct_of_peak"]:
            assert f"{S.fmt_num(r['pct_of_peak'], 2)}% of peak" in cell["text"]
        assert f"n={int(r['n'])}" in cell["text"]
    # the H100's FP16 best is not the invalid 131%-of-peak point at n=256
    h100_fp16 = got[("gpu-node-h100", "cuda:0", "float16")]
    assert "n=256" not in h100_fp16["text"] and float(h100_fp16["attrs"]["data-pct"]) < 100
    assert "735" in h100_fp16["text"]


def test_summary_speedup_is_cpu_time_over_gpu_time(fixtures):
    built = fixtures("two_runs")
    els = parse(built["report"].read_text())
    cells = {
        (e["attrs"]["data-dtype"], int(e["attrs"]["data-n"])): e
        for e in els
        if e["section"] == "summary" and "data-n" in e["attrs"]
    }
    raw = raw_square(built["results"])
    run = raw[(raw["run_id"] == "gpu-node-h100") & raw["status"].isin(["ok", "unstable"])]
    cpu = run[run["backend"] == "cpu"].set_index(["dtype", "n"])["median_s"]
    gpu = run[run["backend"] == "cuda"].set_index(["dtype", "n"])["median_s"]
    common = sorted(set(cpu.index) & set(gpu.index))
    assert ("float32", 4096) in common and len(common) == 9
    for key in common:
        expected = cpu[key] / gpu[key]
        assert float(cells[key]["attrs"]["data-speedup"]) == pytest.approx(expected, rel=1e-9)
        assert cells[key]["text"].strip() == S.fmt_num(expected) + "×"
    # float16 at n=256 is flagged invalid on the GPU: shown as a dash, not as a speedup
    assert "data-speedup" not in cells[("float16", 256)]["attrs"] and cells[("float16", 256)]["text"].strip() == "—"


def test_summary_amp_verdicts(fixtures):
    built = fixtures("two_runs")
    els = parse(built["report"].read_text())
    # one table row per device and mode, one cell per workload
    lines = [e for e in els if e["section"] == "summary" and e["tag"] == "tr" and "data-mode" in e["attrs"]]
    rows = [e for e in els if e["section"] == "summary" and e["tag"] == "td" and "data-mode" in e["attrs"]]
    raw = raw_table(built["results"], "amp_*_summary.csv")
    amp = raw[raw["mode"].isin(["amp_bf16", "amp_fp16"])]
    assert len(rows) == len(amp) == 3 * 4  # 3 devices x 4 workloads (mlp, transformer, gpt, resnet)
    assert len(lines) == 3
    for _, r in amp.iterrows():
        (row,) = [
            x
            for x in rows
            if (x["attrs"]["data-run"], x["attrs"]["data-device"], x["attrs"]["data-workload"], x["attrs"]["data-mode"])
            == (r["run_id"], r["device"], r["workload"], r["mode"])
        ]
        assert float(row["attrs"]["data-speedup"]) == pytest.approx(r["speedup"])
        assert S.fmt_num(r["speedup"]) + "×" in row["text"]
        assert row["text"].strip().startswith("✓") == bool(r["faster"])
        assert row["attrs"]["title"].startswith("faster") == bool(r["faster"])
    html = built["report"].read_text()
    headline = html[html.index('<ul class="headlines">') : html.index("</ul>", html.index('<ul class="headlines">'))]
    assert "cuda:0 H100 80GB HBM3" in headline and "1,310 TFLOP/s" in headline and "accuracy parity" in headline


def test_summary_comes_first(fixtures):
    html = fixtures("two_runs")["report"].read_text()
    order = [
        html.index(f'<section id="{s}"')
        for s in (
            "summary",
            "environment",
            "matmul",
            "shapes",
            "search",
            "membw",
            "roofline",
            "warmup",
            "transfer",
            "amp",
            "points",
            "data",
        )
    ]
    assert order == sorted(order)


def test_self_contained(fixtures):
    html = fixtures("two_runs")["report"].read_text()
    els = parse(html)
    imgs = [e for e in els if e["tag"] == "img"]
    assert len(imgs) == len(FIGURES)
    assert all(e["attrs"]["src"].startswith("data:image/png;base64,") for e in imgs)
    assert not [e for e in els if e["tag"] in ("script", "iframe", "object", "embed")]
    for e in els:
        for key in ("src", "href", "srcset", "action", "poster"):
            value = e["attrs"].get(key)
            if value is not None:
                assert value.startswith(("data:", "#")), (e["tag"], key, value[:80])
    assert not re.search(r"url\(|@import|https?://", html.split("</style>")[0]), "CSS must not load anything"


def test_two_runs_compared_side_by_side(fixtures):
    built = fixtures("two_runs")
    html = built["report"].read_text()
    els = parse(html)
    runs_table = html[html.index('id="runs-table"') : html.index("</table>", html.index('id="runs-table"'))]
    assert "<th>gpu-node-h100</th><th>laptop-cpu</th>" in runs_table
    for text in (
        "gpu-node-01",
        "laptop",
        "2.13.0+cu126",
        "2.13.0+cpu",
        "/shared/images/accelbench-cuda.sif",
        "AMD EPYC 7V13 64-Core Processor",
        "AMD Ryzen 7 5800U with Radeon Graphics",
    ):
        assert text in runs_table, text
    assert 'class="differs"' in runs_table
    # each run's exact config, hash and commit
    import json

    for run in ("gpu-node-h100", "laptop-cpu"):
        info = json.loads((built["results"] / run / "run.json").read_text())
        assert f"Exact config (hash {info['config_hash']})" in html
        assert info["git_commit"] in runs_table
        budget = info["config"]["matmul"]["point_budget_s"]
        assert f"point_budget_s: {budget}" in html
    assert "sizes: [256, 512, 1024, 2048, 4096, 8192, 16384]" in html and "sizes: [256, 512, 1024, 2048]" in html
    # one colour per run + device, the plots' colours, in the summary
    summary = [
        e for e in els if e["section"] == "summary" and e["tag"] == "span" and "sw" in e["attrs"].get("class", "")
    ]
    colours = {re.search(r"#[0-9a-f]{6}", e["attrs"]["style"]).group(0) for e in summary}
    import seaborn as sns

    assert colours == set(sns.color_palette("colorblind", 3).as_hex())
    groups = [e for e in els if e["section"] == "points" and e["tag"] == "tbody"]
    assert [(g["attrs"]["data-run"], g["attrs"]["data-device"]) for g in groups] == [
        ("gpu-node-h100", "cpu"),
        ("gpu-node-h100", "cuda:0"),
        ("laptop-cpu", "cpu"),
    ]


def test_every_point_listed_with_flags_explained(fixtures):
    built = fixtures("two_runs")
    html = built["report"].read_text()
    els = parse(html)
    rows = [e for e in els if e["tag"] == "tr" and "data-status" in e["attrs"]]
    raw = raw_table(built["results"], "matmul_*.csv", "matmul")  # the square sweep and the named shapes
    assert len(rows) == len(raw)
    assert sorted(r["attrs"]["data-status"] for r in rows) == sorted(raw["status"])
    flagged = [r for r in rows if r["attrs"]["data-status"] != "ok"]
    assert flagged and all("flag" in r["attrs"].get("class", "") and "--flag:#" in r["attrs"]["style"] for r in flagged)
    legend = next(e for e in els if e["attrs"].get("id") == "status-legend")["text"]
    for status in ("unstable", "invalid", "skipped_budget", "oom", "wrong_result", "unsupported", "error"):
        assert status in legend
        assert S.STATUS_INFO[status][2] in legend
    assert "CUDA out of memory" in html and "131% of peak" in html
    assert 'id="incomplete"' not in html


def test_incomplete_data_banner_names_the_file(fixtures):
    built = fixtures("incomplete")
    html = built["report"].read_text()
    damaged = built["results"] / "gpu-node-h100" / "matmul_cuda.csv"
    start = html.index('id="incomplete"')
    banner = html[start : html.index("</div>", start)]
    assert start < html.index('<section id="summary"')
    assert "Incomplete data" in banner and str(damaged) in banner and "truncated" in banner
    assert "--allow-incomplete" in banner


def test_cpu_only_report(fixtures):
    html = fixtures("cpu_only")["report"].read_text()
    assert 'id="no-accelerator"' in html and 'id="transfer-not-measured"' in html
    assert "laptop-cpu" in html and "gpu-node-h100" not in html
    assert 'id="incomplete"' not in html


def test_empty_results_report(fixtures):
    html = fixtures("empty")["report"].read_text()
    assert 'id="incomplete"' in html and "no run folder" in html
    assert "No matmul point was measured" in html


def test_absent_backend_and_missing_figures(tmp_path):
    """A run that asked for CUDA without a GPU: the absent backend is listed with its reason, and figures
    that were never made are named in the banner instead of breaking the page."""
    from accelbench.cli import main

    results = tmp_path / "results"
    add_absent_backend(write_cpu_run(results))
    assert main(["aggregate", "--results", str(results)]) == 0
    (tmp_path / "no-plots").mkdir()
    out = tmp_path / "report.html"
    assert (
        main(
            [
                "report",
                "--aggregate-dir",
                str(results / "aggregate"),
                "--plots-dir",
                str(tmp_path / "no-plots"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    html = out.read_text()
    els = parse(html)
    absent = [e for e in els if e["tag"] == "tr" and e["attrs"].get("data-status") == "absent"]
    assert len(absent) == 1 and "no CUDA device visible" in absent[0]["text"]
    assert "cuda (no device)" in html and "nan" not in absent[0]["text"]
    banner = html[html.index('id="incomplete"') :]
    assert "matmul_tflops.png" in banner and "figure missing" in banner
    assert len([e for e in els if e["tag"] == "img"]) == 0


@pytest.mark.parametrize(
    "faster,parity,speed_word,parity_words,css",
    [
        ("yes", "yes", "faster", "accuracy parity", "good"),
        ("no", "yes", "slower", "accuracy parity", "meh"),
        ("inconclusive", "yes", "no clear difference", "accuracy parity", "meh"),
        ("yes", "inconclusive", "faster", "accuracy parity inconclusive", "meh"),
        ("no", "no", "slower", "accuracy lost", "bad"),
    ],
)
def test_amp_verdicts_are_three_state(faster, parity, speed_word, parity_words, css):
    """faster / accuracy_parity are yes, no or inconclusive: an interval that straddles the line must
    never be shown as a loss (or a gain)."""
    from accelbench.stages.amp.summary import summary_amp

    row = {
        "run_id": "r",
        "host": "h",
        "backend": "cpu",
        "device": "cpu",
        "device_name": "CPU X",
        "workload": "mlp",
        "mode": "amp_bf16",
        "baseline": "fp32",
        "trials": 3,
        "speedup": 0.9,
        "speedup_ci95_low": 0.5,
        "speedup_ci95_high": 1.5,
        "acc_diff": 0.0,
        "acc_diff_ci95_low": -0.01,
        "acc_diff_ci95_high": 0.01,
        "faster": faster,
        "accuracy_parity": parity,
        "verdict": "v",
        "status": "ok",
    }
    tables = {"amp_summary": pd.DataFrame([row])}
    out = summary_amp(tables, S.series(tables))
    assert len(out) == 1
    assert out[0]["verdict_short"] == f"{speed_word} · {parity_words}"
    assert out[0]["verdict_class"] == css


def test_history_section_shows_each_headline_trend_and_its_change_point(fixtures):
    """The History section (registry.SECTIONS): from the store, the headline points' run medians over all 13 runs
    with the change point at night-007 marked and its step; only the latest five runs are in full (focus)."""
    built = fixtures("history")
    html = built["report"].read_text()
    els = parse(html)
    section = [e for e in els if e.get("section") == "history"]
    assert section, "no History section"
    rows = [e for e in section if e["tag"] == "tr" and e["attrs"].get("data-verdict")]
    assert rows and all(r["attrs"]["data-verdict"] == "slower" for r in rows), [r["text"][:80] for r in rows]
    assert all("night-007" in r["text"] and "+20" in r["text"] and "13" in r["text"] for r in rows)
    imgs = [e for e in section if e["tag"] == "img"]
    assert len(imgs) == 1 and imgs[0]["attrs"]["src"].startswith("data:image/png;base64,")
    assert imgs[0]["attrs"]["alt"].startswith("history: ")
    hist = pd.read_csv(built["aggregate"] / f"{registry.HISTORY_TABLE}.csv")
    assert hist["run_id"].nunique() == 13 and hist.groupby("series")["change_point"].sum().max() == 1
    runs = pd.read_csv(built["aggregate"] / "runs.csv")
    assert sorted(runs["run_id"]) == [f"night-{i:03d}" for i in range(7, 12)]
    # one run per series: the section still renders, with no change point and no slower verdict
    two = parse(fixtures("two_runs")["report"].read_text())
    verdicts = [
        e["attrs"].get("data-verdict")
        for e in two
        if e.get("section") == "history" and e["tag"] == "tr" and e["attrs"].get("data-verdict")
    ]
    assert verdicts and set(verdicts) == {"same"}


def test_history_section_says_which_runs_are_in_full(fixtures):
    html = fixtures("history")["report"].read_text()
    focus = [e for e in parse(html) if e["attrs"].get("id") == "history-focus"]
    assert focus and "The latest 5 of the 13 runs under results/ are shown in full" in focus[0]["text"]
    assert 'id="history-focus"' not in fixtures("two_runs")["report"].read_text()  # every run is in full there


def test_within_run_intervals_say_what_they_cover(fixtures):
    """Every within-run interval is headed "within run", a note says what that covers, and a descriptive interval
    (fewer blocks than batch means need) is marked in its cell while a batch-means one is not."""
    built = fixtures("two_runs")
    html = built["report"].read_text()
    els = parse(html)
    raw = raw_table(built["results"], "matmul_*.csv", "matmul")
    shown = []  # the points table's CI cells (its sixth column) that hold an interval
    for i, e in enumerate(els):
        if e["tag"] == "tr" and "data-status" in e["attrs"]:
            tds = [x["text"] for x in els[i + 1 : i + 16] if x["tag"] == "td"]
            shown += [tds[5]] if tds[5] else []
    marked = [c for c in shown if c.endswith(" descr.")]
    measured = raw[raw["ci95_low_s"].notna()]
    assert len(shown) == len(measured)
    assert len(marked) == int((measured["ci_method"] != "batch_means").sum()) > 0
    assert len(marked) < len(shown)  # the fixture's batch-means points are not marked
    # the sections of these stages (scaling's and compare's intervals are their own)
    ours = {"points", "shapes", "search", "membw", "amp", "training"}
    heads = [e for e in els if e["tag"] == "th" and "95% CI" in e["text"] and e["section"] in ours]
    assert {h["section"] for h in heads} == ours
    assert all("within run" in h["text"] for h in heads), [h["text"] for h in heads]
    notes = [e for e in els if e["tag"] == "p" and "covers variation within this one run" in e["text"]]
    assert {n["section"] for n in notes} >= {"points", "membw", "search", "shapes"}
    amp = [e for e in els if e["tag"] == "p" and "seed-to-seed variation within this process" in e["text"]]
    assert {n["section"] for n in amp} >= {"amp"}
