# Aggregation, plots and the HTML report run on the host over every run under results/.
# Tables and figures are accelbench.registry.TABLES / FIGURES; each figure's caption is
# workflow/report/<figure>.rst, which the HTML report quotes too (one text per figure).


# The finished run goes into the history store (results/history.duckdb, shared by every run: one writer at a time).
rule history:
    input:
        run=run_path(registry.RUN_FILE),
        devices=run_path(registry.DEVICES_FILE),
        tables=[run_path(name) for name in registry.run_files(BACKENDS)],
    output:
        run_path(registry.HISTORY_RECEIPT),
    log:
        run_path(registry.log_file("history")),
    threads: 1
    resources:
        **scheduler_resources(registry.STAGES["history"]),
        mem_mb=registry.STAGES["history"].mem_mb,
        runtime=registry.STAGES["history"].runtime_min,
    params:
        run_dir=lambda wildcards, input: subpath(input.run, parent=True),
        store=f"{RESULTS}/{registry.HISTORY_FILE}",
    shell:
        "accelbench history add {params.run_dir:q} --store {params.store:q} --receipt {output:q} > {log:q} 2>&1"


rule aggregate:
    input:
        run=run_path(registry.RUN_FILE),
        devices=run_path(registry.DEVICES_FILE),
        tables=[run_path(name) for name in registry.run_files(BACKENDS)],
        history=run_path(registry.HISTORY_RECEIPT),
    output:
        expand(f"{AGGREGATE_DIR}/{{table}}.csv", table=list(registry.TABLES)),
        manifest=f"{AGGREGATE_DIR}/{registry.MANIFEST}",
    log:
        f"{RESULTS}/{registry.log_file('aggregate')}",
    threads: 1
    resources:
        **scheduler_resources(registry.STAGES["aggregate"]),
        mem_mb=registry.STAGES["aggregate"].mem_mb,
        runtime=registry.STAGES["aggregate"].runtime_min,
    params:
        results=lambda wildcards, input: subpath(input.run, ancestor=2),
        out_dir=lambda wildcards, output: subpath(output.manifest, parent=True),
    shell:
        "accelbench aggregate --results {params.results:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule plots:
    input:
        manifest=f"{AGGREGATE_DIR}/{registry.MANIFEST}",
    output:
        [
            report(
                f"{PLOTS_DIR}/{f.name}.png",
                caption=f"../report/{f.caption}",
                category=f.category,
            )
            for f in registry.FIGURES.values()
        ],
        [f"{PLOTS_DIR}/{name}.svg" for name in registry.FIGURES],
    log:
        f"{RESULTS}/{registry.log_file('plots')}",
    threads: 1
    resources:
        **scheduler_resources(registry.STAGES["plots"]),
        mem_mb=registry.STAGES["plots"].mem_mb,
        runtime=registry.STAGES["plots"].runtime_min,
    params:
        aggregate_dir=lambda wildcards, input: subpath(input.manifest, parent=True),
        out_dir=lambda wildcards, output: subpath(output[0], parent=True),
    shell:
        "accelbench plots --aggregate-dir {params.aggregate_dir:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule report:
    input:
        manifest=f"{AGGREGATE_DIR}/{registry.MANIFEST}",
        plots=[f"{PLOTS_DIR}/{name}.png" for name in registry.FIGURES],
        # local(): part of the workflow, not of the results (with a storage provider, e.g. on Kubernetes, these
        # are read where the workflow is deployed, never looked up in the storage)
        captions=[
            local(os.path.join(workflow.basedir, registry.CAPTIONS_DIR, f.caption))
            for f in registry.FIGURES.values()
        ],
        comparison=COMPARE_OUTPUTS,  # empty unless compare_to is set (compare.smk)
    output:
        report(REPORT_HTML, caption="../report/report.rst", category="Report"),
    log:
        f"{RESULTS}/{registry.log_file('report')}",
    threads: 1
    resources:
        **scheduler_resources(registry.STAGES["report"]),
        mem_mb=registry.STAGES["report"].mem_mb,
        runtime=registry.STAGES["report"].runtime_min,
    params:
        aggregate_dir=lambda wildcards, input: subpath(input.manifest, parent=True),
        plots_dir=lambda wildcards, input: subpath(input.plots[0], parent=True),
        captions_dir=lambda wildcards, input: subpath(input.captions[0], parent=True),
        comparison=COMPARE.get("points", ""),
    shell:
        "accelbench report --aggregate-dir {params.aggregate_dir:q} --plots-dir {params.plots_dir:q}"
        " --captions-dir {params.captions_dir:q} --comparison={params.comparison:q} --out {output:q} > {log:q} 2>&1"
