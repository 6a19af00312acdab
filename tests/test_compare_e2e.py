"""``accelbench compare`` on real runs: the whole pipeline (snakemake, tiny CPU config) run with ``cpu_threads``
2, then 1 with ``--config compare_to=<the 2-thread run>`` (the compare step and the report's section: one run a
side, so inconclusive), then 2 and 1 once more; ``accelbench compare`` of the two groups (two runs a side, more on
a retry) must call the 1-thread float32 points at n >= 512 slower, name the threads and exit 1; the two 1-thread
runs of that group (one config) compared one against one are never slower (and say "1 run per side"). The two
tests share the group of four runs (``groups``: made once per module, a further group only when an attempt asks
for it).

Why this is not flaky. On an idle 2-core machine two MKL threads multiply float32 512x512 and 1024x1024 matrices
about 2x as fast as one (measured here: 320-336 against 160-170 GFLOP/s), a speed change of -50% against the
--min-effect of 20% used for that claim; between two runs of the same 1-thread config the drift is a few percent
against the 50% used for the second claim (slower would need twice the time). These floors are far wider than the
default, because this machine is shared: other jobs (CI's other tests, other sessions) can take a core for a
minute, and then a 2-thread run slows down by 2x or more (its two threads wait for each other) and a 1-thread run
by up to 1.5x. No statistic can tell that from a real change between the runs. So before each group of runs the
test waits (up to 10 minutes in all) until two threads are really 1.6x as fast as one here, and each claim is measured on
a group of runs that grows with each attempt (2, then 4, then 6 runs a side: a cloud VM's runs can differ by 20%
and more even when it is otherwise idle, which 2 runs a side cannot resolve at df ~ 2); a broken comparison fails
at every size, a correct one only if even 6 runs a side were disturbed. (Growing until the claim holds is optional
stopping: it would inflate a false-alarm rate, but this claim is about power against a real 2x change.) ``matmul.unstable_iqr_ratio`` is raised for the same reason (a
disturbed point is flagged unstable, which makes its verdict inconclusive by definition: correct, but not what is
tested). The stages the claims do not read (memory bandwidth, transfers, attention) run at one or two tiny points:
they are compared too, but no claim here is about them."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from accelbench import registry
from tiny_config import AB_TINY
from workflow_runner import BIN, run_snakemake, snakemake_env

pytestmark = pytest.mark.slow

ATTEMPTS = 3
CONFIG = {
    "backends": ["cpu"],
    "seed": 0,
    "warmup": {"n": 64, "max_iters": 30, "window": 3, "rel_tol": 0.5},
    "matmul": {
        "sizes": [512, 1024],
        "dtypes": ["float32"],
        "min_run_time_s": 0.2,
        "point_budget_s": 30.0,
        "unstable_iqr_ratio": 0.5,
        "tf32": False,
        "fp8": False,
    },
    "amp": {
        "workloads": ["mlp"],
        "seeds": [0, 1],
        "steps": 12,
        "warmup_steps": 2,
        "batch_size": 32,
        "data": {"n_train": 256, "n_test": 128, "n_features": 16, "n_classes": 4},
        "mlp": {"hidden": 32, "layers": 2},
    },
    # not what the claims read: the smallest sweeps (the defaults take most of a run's time)
    "membw": {"min_kb": 64, "max_mb": 1, "min_run_time_s": 0.02},
    "transfer": {"sizes_mb": [1]},
    "attention": AB_TINY["attention"],
}


QUIET_RATIO = 1.6  # two threads at least this much faster than one: nobody else is using the second core
QUIET_WAIT_S = 600


def two_cores_free() -> float:
    """float32 1024x1024 product speed with two threads over one, measured now (about a second)."""
    import torch
    from torch.utils.benchmark import Timer

    a, b, c = torch.randn(1024, 1024), torch.randn(1024, 1024), torch.empty(1024, 1024)
    speed = {}
    for threads in (1, 2):
        t = Timer("torch.mm(a, b, out=c)", globals={"torch": torch, "a": a, "b": b, "c": c}, num_threads=threads)
        speed[threads] = 1.0 / t.blocked_autorange(min_run_time=0.3).median
    return speed[2] / speed[1]


_DEADLINE: list[float] = []


def wait_until_quiet(log: list) -> None:
    """Wait until the machine's second core is free, at most QUIET_WAIT_S for the whole module; record what was
    seen either way (a failure message then shows whether the machine was ever quiet)."""
    if not _DEADLINE:
        _DEADLINE.append(time.monotonic() + QUIET_WAIT_S)
    while True:
        ratio = two_cores_free()
        if ratio >= QUIET_RATIO or time.monotonic() > _DEADLINE[0]:
            log.append(f"2-thread/1-thread speed {ratio:.2f} before the runs")
            return
        time.sleep(20)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("compare-e2e")


def pipeline(work: Path, run: str, threads: int, compare_to: str = "", report: bool = False) -> None:
    """One real run. Without ``report``, snakemake's target is the run's history receipt: every stage and the
    history store (what ``accelbench compare`` reads), but not the aggregate, plots and report, which go over
    every run under results/ and so cost more with each run made; the report is checked once."""
    config = {**CONFIG, "run": run, "cpu_threads": threads}
    extra = ("--config", f"compare_to={compare_to}") if compare_to else ()
    target = () if report else (f"{registry.RESULTS}/{run}/{registry.HISTORY_RECEIPT}",)
    proc = run_snakemake(work, "--cores", "2", *extra, *target, config=config, config_name=f"{run}.yaml", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def compare(work: Path, baseline, candidate, min_effect: float) -> tuple[int, pd.DataFrame, str]:
    """``accelbench compare`` of two runs, or of two groups (lists of run ids)."""
    groups = isinstance(baseline, list)
    names = (
        (f"{baseline[0]}+{len(baseline) - 1}", f"{candidate[0]}+{len(candidate) - 1}")
        if groups
        else (baseline, candidate)
    )
    runs = ["--baseline", ",".join(baseline), "--candidate", ",".join(candidate)] if groups else [baseline, candidate]
    out_dir = work / "cli" / f"{names[0]}__{names[1]}"
    proc = subprocess.run(
        [
            str(BIN / "accelbench"),
            "compare",
            *runs,
            "--min-effect",
            str(min_effect),
            "--out-dir",
            str(out_dir),
            "--no-plot",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env=snakemake_env(),
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, pd.read_csv(out_dir / f"{names[0]}__{names[1]}.csv"), proc.stdout


class Groups:
    """Groups of four real runs, A B A B: ``two-<k>`` (2 threads), ``one-<k>`` (1 thread, ``compare_to`` the first:
    the workflow's compare step), ``two-<k>-b``, ``one-<k>-b``; group k is made when an attempt first asks for it.
    The first group's ``one-0`` alone runs the whole workflow (its compare step and report are kept under
    ``step-0/``); every other run stops at its history receipt (see ``pipeline``)."""

    def __init__(self, work: Path):
        self.work, self.made, self.seen = work, 0, []

    def __call__(self, k: int) -> tuple[str, str]:
        while self.made <= k:
            self.make(self.made)
            self.made += 1
        return f"two-{k}", f"one-{k}"

    def make(self, k: int) -> None:
        work, two, one = self.work, f"two-{k}", f"one-{k}"
        wait_until_quiet(self.seen)
        pipeline(work, two, threads=2)
        if k == 0:  # the workflow's compare step and the report's section: checked on the first group
            pipeline(work, one, threads=1, compare_to=two, report=True)
            step = work / f"step-{k}"
            step.mkdir()
            shutil.copy2(work / "results" / "report.html", step / "report.html")
            for ext in ("csv", "png"):
                written = work / "results" / "compare" / f"{two}__{one}.{ext}"
                if written.exists():
                    shutil.copy2(written, step / written.name)
        else:
            pipeline(work, one, threads=1)
        pipeline(work, f"{two}-b", threads=2)  # A B A B: slow drift falls on both sides
        pipeline(work, f"{one}-b", threads=1)


@pytest.fixture(scope="module")
def groups(work):
    return Groups(work)


def test_compare_step_in_the_workflow_and_the_verdicts_of_real_runs(work, groups):
    seen = groups.seen
    for attempt in range(ATTEMPTS):
        two, one = groups(attempt)
        if attempt == 0:  # the workflow's compare step and the report's section (not a timing claim)
            step = work / "step-0"
            written = step / f"{two}__{one}.csv"
            assert written.stat().st_size > 0 and (step / f"{two}__{one}.png").exists()
            html = (step / "report.html").read_text()
            assert f"<h2>Compared with {two}</h2>" in html
            assert html.index('id="summary"') < html.index('id="compare"') < html.index('id="environment"')
            assert f"{one} against {two}:" in html and "threads 2\u21921" in html
            assert 'alt="comparison: ' in html
            step_points = pd.read_csv(written)
            alone = step_points[(step_points["match"] == "both") & (step_points["spread_source"] == "none")]
            assert not alone["verdict"].isin(["slower", "faster"]).any()  # one run a side: no spread, no claim
        # the groups grow with each attempt (2, 4, 6 runs a side): every run made so far, none thrown away
        base = [r for k in range(attempt + 1) for r in (f"two-{k}", f"two-{k}-b")]
        cand = [r for k in range(attempt + 1) for r in (f"one-{k}", f"one-{k}-b")]
        rc, df, out = compare(work, base, cand, min_effect=0.2)
        fp32 = df[(df["table"] == "matmul") & (df["dtype"] == "float32") & (df["n"] >= 512) & (df["match"] == "both")]
        seen.append(fp32[["n", "verdict", "speed_change_pct", "provenance_diff"]].to_dict("records"))
        if rc == 1 and len(fp32) == 2 and (fp32["verdict"] == "slower").all():
            break
    assert rc == 1, seen
    assert sorted(fp32["n"]) == [512, 1024] and (fp32["verdict"] == "slower").all(), seen
    assert (fp32["speed_change_ci95_high_pct"] < 0).all() and (fp32["speed_change_pct"] < -20).all()
    assert (fp32["baseline_runs"] == len(base)).all() and (fp32["spread_source"] == "groups").all()
    assert fp32["provenance_diff"].str.contains("threads 2\u21921").all()
    assert "threads 2\u21921" in out and out.splitlines()[1].split()[0] == "slower"
    stem = f"{base[0]}+{len(base) - 1}__{cand[0]}+{len(cand) - 1}"
    prov = pd.read_csv(work / "cli" / stem / f"{stem}_provenance.csv")
    assert {"threads", "cpu_threads"} <= set(prov["field"])


def test_the_same_config_twice_is_never_slower(work, groups):
    """``one-<k>`` against ``one-<k>-b``: one 1-thread config, run twice (a 2-thread run between them)."""
    seen = []
    for attempt in range(ATTEMPTS):
        _, first = groups(attempt)
        second = f"{first}-b"
        rc, df, out = compare(work, first, second, min_effect=0.5)
        seen.append(df.loc[df["match"] == "both", ["label", "verdict", "speed_change_pct"]].to_dict("records"))
        if rc == 0:
            break
    assert rc == 0 and not (df["verdict"] == "slower").any(), (seen, groups.seen)
    matched = df[df["match"] == "both"]
    measured = matched[matched["speed_change_pct"].notna()]  # one run a side: "1 run per side", or history's spread
    assert len(measured) and ((measured["reason"] == "1 run per side") | (measured["spread_source"] == "history")).all()
    assert len(matched) >= 7  # warm-up, 2 matmul points, 4 AMP trials
    assert matched["provenance_diff"].astype("string").fillna("").eq("").all()  # nothing but the run id differs
