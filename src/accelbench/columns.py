"""Facts every stage shares, defined once: the column groups that tables are made of (a plug-in builds its
table's ``columns`` from them with ``cols``), the status groups, and the provenance labels.

Standard library only: the plug-in declarations import this module.
"""

from __future__ import annotations

# ---- columns shared by every table a stage writes ---------------------------------------------------------
PROVENANCE = (
    "run_id",
    "host",
    "accelbench_version",
    "git_commit",
    "torch_version",
    "cuda_version",
    "hip_version",
    "container_image",
    "config_hash",
    "method_version",
)
DEVICE = ("backend", "device", "device_name")
# How the stage warmed its device in its own process before measuring it (measure.stability).
DEVICE_WARMUP = ("device_warmup_s", "device_warmup_calls", "device_warmup_status")
# What the device was doing while a row was measured (measure.telemetry). Null where a sensor is missing, never 0.
TELEMETRY = ("clock_mhz_median", "clock_mhz_min", "power_w_median", "temp_c_max", "energy_j")
THROTTLE = ("throttled", "throttle_reasons", "telemetry_source")
TELEMETRY_EXTRA = (
    "telemetry_samples",
    "mem_clock_mhz_median",
    "util_pct_median",
    "energy_source",
    "telemetry_start_unix_s",
    "telemetry_end_unix_s",
    "power_source",
    "telemetry_too_short_for",
    "clock_source",
)
TELEMETRY_NUMERIC = TELEMETRY
# How a row's within-run interval (ci95_low_s..ci95_high_s) was computed (measure.blocks): it follows the
# interval's columns in each timed table. A file written before these columns had the order-statistic interval
# over blocks taken as exchangeable: descriptive.
WITHIN_RUN_CI = ("ci_method", "lag1_autocorr")
WITHIN_RUN_CI_DESCRIBE = {
    "ci_method": "how the 95% interval was computed: batch_means (10 consecutive batches of blocks, sectioning "
    "around the median: accounts for the blocks' autocorrelation; from 50 blocks on) or descriptive "
    "(fewer blocks: the order-statistic interval, which takes the blocks as exchangeable). Either "
    "covers variation within this one run only, not run to run",
    "lag1_autocorr": "lag-1 autocorrelation of the log block times, in the order measured (NaN from fewer than "
    "3 blocks)",
}
# one row per reading of a device's sensors during a stage (telemetry_<stage>_<backend>.csv)
TELEMETRY_SERIES = (
    "stage",
    "time_unix_s",
    "t_s",
    "clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "util_pct",
    "energy_j",
    "throttle_reasons",
    "telemetry_source",
    "status",
)
TELEMETRY_SERIES_NUMERIC = (
    "time_unix_s",
    "t_s",
    "clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "util_pct",
    "energy_j",
)
# Shared documented columns added after files without them were written, and the value such files mean (a
# table's own added columns are its ``Table.added_defaults``).
ADDED_COLUMNS = {
    "method_version": 0,
    "device_warmup_s": None,
    "device_warmup_calls": None,
    "device_warmup_status": None,
}
ADDED_COLUMNS.update(dict.fromkeys((*TELEMETRY, *THROTTLE)))
ADDED_COLUMNS.update({"ci_method": "descriptive", "lag1_autocorr": None})

# The long table of raw timing samples (Parquet, one file per device stage and backend). One row per sample:
# ``table`` and ``point`` say which row of which results table it belongs to (``point``: the row's identity
# values, ``col=value`` joined by ``|``); ``sample`` is its index in measurement order; ``sample_s`` seconds per
# call; ``steady`` whether the row's statistic uses it.
SAMPLE_COLUMNS = (
    "run_id",
    "method_version",
    "backend",
    "device",
    "table",
    "point",
    "sample",
    "sample_s",
    "calls",
    "steady",
)

# ---- status groups ------------------------------------------------------------------------------------------
# TRUSTED: a number to report and to build on (best points, roofline ceilings, soak targets). "unstable" is a
# real measurement whose blocks spread more than the stability rule allows: shown and flagged, not dropped.
TRUSTED = ("ok", "unstable")
# MEASURED: the point was timed (its number exists), trusted or not (invalid: above the peak; wrong_result:
# the product disagreed with the reference).
MEASURED = (*TRUSTED, "invalid", "wrong_result")
# COMPARABLE: what accelbench compare calls a verdict on; any other status makes it inconclusive (an unstable
# point's spread is by definition too wide for a verdict).
COMPARABLE = ("ok",)
# statuses every device table may hold besides its own
FAILURES = ("oom", "unsupported", "error", "absent")

# ---- labels -------------------------------------------------------------------------------------------------
# The colours of accelbench compare's verdicts, defined once: ``line`` in figures (Okabe-Ito, colour-blind safe),
# ``fg``/``bg`` of the report's badges (dark text on a light ground of the same hue, readable in print).
VERDICT_COLORS = {
    "slower": {"line": "#D55E00", "fg": "#8c1111", "bg": "#fbe1e1"},
    "faster": {"line": "#009E73", "fg": "#1a5e20", "bg": "#e3f1e4"},
    "same": {"line": "#7f7f7f", "fg": "#3d3d3d", "bg": "#eeeeee"},
    "inconclusive": {"line": "#E69F00", "fg": "#7a4a00", "bg": "#fdf0d5"},
}


def cols(*parts) -> tuple[str, ...]:
    """Column groups joined in order: ``cols(PROVENANCE, DEVICE, ("n", "median_s"), DEVICE_WARMUP)``."""
    return tuple(c for part in parts for c in part)
