"""Coverage of the within-run 95% intervals (measure.blocks) on simulated block times: stationary Gaussian AR(1)
series with lag-1 correlation phi (0.27-0.36 is what real runs here show), n blocks, REPS replications, seeded.

For each (n, phi): how often the batch-means interval of the mean and of the median (10 batches), the interval
``summarize`` gives (batch means from 50 blocks, else the order-statistic one, labelled descriptive), the
order-statistic interval and the independent t-interval cover the true centre. Where the chosen interval is
descriptive its coverage is shown to say how far "descriptive" is from 95%, not as a claim.

    python bench/within_run_coverage.py [--reps 1000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import signal

from accelbench.measure import blocks


def ar1(rng, n: int, phi: float, burn: int = 200) -> np.ndarray:
    e = rng.standard_normal(n + burn) * math.sqrt(1 - phi**2)
    return signal.lfilter([1.0], [1.0, -phi], e)[burn:]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("| n | phi | batch means (mean) | batch means (median) | summarize's (method) | order statistics | iid t |")
    print("|---|---|---|---|---|---|---|")
    for n in (10, 30, 50, 100, 200):
        for phi in (0.0, 0.35, 0.5):
            hits = np.zeros(5)
            method = ""
            for _ in range(args.reps):
                x = ar1(rng, n, phi)
                _, lo, hi = blocks.batch_means_ci(x, "mean")
                hits[0] += lo <= 0 <= hi
                _, lo, hi = blocks.batch_means_ci(x, "median")
                hits[1] += lo <= 0 <= hi
                iv = blocks.median_interval(x)
                method = iv.method
                hits[2] += iv.low <= 0 <= iv.high
                lo, hi = blocks.order_statistic_ci(x)
                hits[3] += lo <= 0 <= hi
                _, lo, hi = blocks.iid_mean_ci(x)
                hits[4] += lo <= 0 <= hi
            c = hits / args.reps * 100
            print(f"| {n} | {phi} | {c[0]:.1f}% | {c[1]:.1f}% | {c[2]:.1f}% ({method}) | {c[3]:.1f}% | {c[4]:.1f}% |")


if __name__ == "__main__":
    main()
