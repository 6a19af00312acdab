# accelbench compare as a step of the run (docs/comparing.md): with `--config compare_to=<run>`, this run is
# compared point by point with the finished run results/<run>/ (which must exist: checked here, before any job),
# and the report gets its "Compared with <run>" section. The step exits 0 whatever it finds (--exit-zero): the
# report shows the regressions; `accelbench compare BASELINE CANDIDATE` is the gate that exits 1 on one.
try:
    COMPARE_BASELINE = check_compare_to(config, RESULTS, RUN)
except ConfigError as exc:
    sys.exit(f"accelbench: config error: {exc}")
COMPARE = (
    {
        k: f"{RESULTS}/{v}"
        for k, v in registry.compare_files(config["compare_to"], RUN).items()
    }
    if COMPARE_BASELINE
    else {}
)
COMPARE_OUTPUTS = list(COMPARE.values())

if COMPARE:

    rule compare:
        input:
            baseline=f"{COMPARE_BASELINE}/{registry.RUN_FILE}",
            run=run_path(registry.RUN_FILE),
            tables=[run_path(name) for name in registry.run_files(BACKENDS)],
            samples=[run_path(name) for name in registry.sample_files(BACKENDS)],
        output:
            # the points, each stage's own comparison (registry.COMPARE_EXTRAS), the provenance, the figure
            **{k: v for k, v in COMPARE.items() if k != "png"},
            png=report(
                COMPARE["png"],
                caption="../report/comparison.rst",
                category="Comparison",
            ),
        log:
            f"{RESULTS}/{registry.log_file('compare')}",
        threads: 1
        resources:
            **scheduler_resources(registry.STAGES["compare"]),
            mem_mb=registry.STAGES["compare"].mem_mb,
            runtime=registry.STAGES["compare"].runtime_min,
        params:
            results=RESULTS,
            baseline=config["compare_to"],
            candidate=RUN,
            out_dir=lambda wildcards, output: subpath(output.points, parent=True),
        shell:
            "accelbench compare --results {params.results:q} {params.baseline:q} {params.candidate:q}"
            " --out-dir {params.out_dir:q} --exit-zero > {log:q} 2>&1"
