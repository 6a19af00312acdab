"""The README's screenshot: a real run of the default pipeline, its report opened in headless Chromium.

    python docs/make_screenshot.py                       # run the pipeline in a temporary folder, then shoot
    python docs/make_screenshot.py --report results/report.html   # shoot an existing report

The run is ``snakemake -s <repo>/Snakefile --directory <tmp> --configfile <repo>/config.yaml --cores 2``
(the quick start's pipeline, with this checkout's code), so the picture shows what a user's first run
shows, not a fixture. Chromium is driven as in ``tests/test_browser.py`` (Debian's chromium and chromedriver,
``bash .ci/setup-browser.sh``). The PNG is reduced to a 256-colour palette so it stays small in the repository
(a report is flat colour and text; the palette loses nothing a reader sees).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "img" / "report.png"
WIDTH, HEIGHT = 1366, 800  # the browser test's width: the report fits it without horizontal scrolling
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    f"--window-size={WIDTH},{HEIGHT}",
]


def run_pipeline(workdir: Path, cores: int) -> Path:
    """The default pipeline in ``workdir``; returns its report."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    argv = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(REPO / "config.yaml"),
        "--cores",
        str(cores),
    ]
    subprocess.run(argv, check=True, env=env)
    return workdir / "results" / "report.html"


def shoot(report: Path, out: Path) -> None:
    """A screenshot of the top of ``report`` (the summary) at WIDTH x HEIGHT, saved as a palette PNG."""
    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="accelbench-chromium-") as profile:
        for flag in FLAGS + [f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        driver = webdriver.Chrome(
            service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options
        )
        try:
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            )
            driver.get(report.resolve().as_uri())
            out.parent.mkdir(parents=True, exist_ok=True)
            raw = out.with_suffix(".raw.png")
            driver.save_screenshot(str(raw))
        finally:
            driver.quit()
    with Image.open(raw) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    raw.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, help="an existing report.html (default: make a run first)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    if args.report:
        shoot(args.report, args.out)
    else:
        with tempfile.TemporaryDirectory(prefix="accelbench-screenshot-") as tmp:
            shoot(run_pipeline(Path(tmp), args.cores), args.out)
    print(f"{args.out}: {args.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
