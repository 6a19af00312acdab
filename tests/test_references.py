"""Published reference figures (``accelbench/data/references.yaml``, ``stages.matmul.references``): every figure cited
with its source and conditions, matched to the right device names (and not to their look-alikes), and the
sentence the report and ``accelbench compare --against references`` print, with the conditions that differ."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml

from accelbench.stages.matmul import references as refs

DOC = yaml.safe_load(refs.resources.files("accelbench").joinpath("data", refs.PATH).read_text())


def test_every_figure_has_a_source_with_url_and_commit_or_date_and_conditions():
    entries = refs.load()
    assert len(entries) >= 12
    for r in entries:
        src = r.source
        assert src["url"].startswith("https://") and src.get("commit") or src.get("date"), r
        assert src["commit"] in src["url"]  # the URL points at the cited commit, not at a moving branch
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
        assert r.conditions.get("shape") and r.conditions.get("statistic") and r.conditions.get("best_shape")
        assert r.conditions.get("torch")


def test_the_figures_the_issue_quotes():
    assert refs.find("NVIDIA H100 80GB HBM3", "bfloat16").tflops == 794.5
    assert refs.find("NVIDIA A100-SXM4-80GB", "bfloat16").tflops == 271.2
    assert refs.find("AMD Instinct MI300X", "bfloat16").tflops == 668.4
    assert refs.find("NVIDIA H100 80GB HBM3", "float8_e4m3fn").tflops == 1402.6
    assert refs.find("NVIDIA H200", "float8_e4m3fn").tflops == 1453.4


@pytest.mark.parametrize(
    "name,dtype,expected",
    [
        ("NVIDIA H200", "bfloat16", "NVIDIA H200 SXM"),  # the table: H100 SXM row, "H200 is the same"
        ("NVIDIA H200 NVL", "bfloat16", None),  # a different power envelope: no figure
        ("NVIDIA H100 PCIe", "bfloat16", None),
        ("NVIDIA H100 NVL", "bfloat16", None),
        ("NVIDIA A100-PCIE-40GB", "bfloat16", "NVIDIA A100 PCIe"),
        ("NVIDIA A100 80GB PCIe", "bfloat16", "NVIDIA A100 PCIe"),
        ("NVIDIA GH200 480GB", "bfloat16", "NVIDIA GH200 SXM"),
        ("NVIDIA B200", "float8_e4m3fn", "NVIDIA B200 SXM"),
        ("AMD Instinct MI300X", "float8_e4m3fn", None),  # the table has no MI300X fp8 figure
        ("NVIDIA H100 80GB HBM3", "float32", None),
        ("AMD EPYC 7V13 64-Core Processor", "float32", None),
    ],
)
def test_device_names_match_only_their_own_model(name, dtype, expected):
    found = refs.find(name, dtype)
    assert (found.device if found else None) == expected


def test_an_entry_without_a_source_or_conditions_is_refused():
    doc = yaml.safe_load(yaml.safe_dump(DOC))
    doc["matmul"][0]["source"] = "nowhere"
    with pytest.raises(refs.ReferenceError, match=r"matmul\[0\].*needs a url"):
        refs.parse(doc)
    doc = yaml.safe_load(yaml.safe_dump(DOC))
    doc["matmul"][1]["conditions"] = {}
    with pytest.raises(refs.ReferenceError, match="no conditions"):
        refs.parse(doc)


def matmul_rows(device_name, points):
    return pd.DataFrame(
        [
            {
                "run_id": "r",
                "backend": "cuda",
                "device": "cuda:0",
                "device_name": device_name,
                "dtype": d,
                "n": n,
                "tflops": t,
                "median_s": 2 * n**3 / t / 1e12,
                "pct_of_peak": 80.0,
                "peak_tflops": 989.0,
                "status": s,
            }
            for d, n, t, s in points
        ]
    )


def test_the_sentence_names_the_source_and_what_differs():
    mm = matmul_rows(
        "NVIDIA H100 80GB HBM3",
        [("bfloat16", 4096, 700.0, "ok"), ("bfloat16", 8192, 781.0, "ok"), ("bfloat16", 16384, 990.0, "invalid")],
    )  # never the untrusted one
    lines = refs.reference_lines(mm, torch_version="2.13.0+cu126", env={})
    assert len(lines) == 1
    line = lines[0]
    assert line["pct"] == pytest.approx(100 * 781 / 794.5) and line["n"] == 8192
    assert line["text"].startswith(
        "cuda:0 NVIDIA H100 80GB HBM3: 781 TFLOP/s BF16 = 98% of the best published "
        "(mamf-finder NVIDIA H100 SXM, 794.5 TFLOP/s, searched shape 2048x2048x13312; "
        "here square n=8192)"
    )
    assert "torch 2.7.0+cu126 there, 2.13.0+cu126 here" in line["text"]
    assert line["commit"] in line["url"]


def test_tunableop_and_power_notes_are_flagged():
    mm = matmul_rows("AMD Instinct MI325X", [("bfloat16", 8192, 700.0, "ok")])
    unset = refs.reference_lines(mm, torch_version="2.6.0+6.2.4", env={})[0]
    assert "PYTORCH_TUNABLEOP_ENABLED=1 there, 0 here" in unset["text"] and "1000W" in unset["text"]
    assert "torch" not in unset["text"].split("differs:")[1]  # the same build: not named
    on = refs.reference_lines(mm, torch_version="2.6.0+6.2.4", env={"PYTORCH_TUNABLEOP_ENABLED": "1"})[0]
    assert "TUNABLEOP" not in on["text"]


def test_no_training_figure_is_shipped_and_the_file_says_why():
    assert DOC["training"] == []
    text = refs.resources.files("accelbench").joinpath("data", refs.PATH).read_text()
    assert "no published" in text and "training figure matches" in text
