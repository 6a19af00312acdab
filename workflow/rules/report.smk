# Aggregation, plots and the HTML report run on the host over every run under results/.
PLOTS = ["matmul_tflops", "matmul_pct_of_peak", "speedup", "warmup", "transfer", "amp_step_time", "amp_loss"]
TABLES = ["runs", "devices", "matmul", "warmup", "transfer", "amp_steps", "amp_trials", "amp_summary"]


rule aggregate:
    input:
        run=f"{RUN_DIR}/run.json",
        devices=f"{RUN_DIR}/devices.json",
        warmup=run_files("warmup"),
        matmul=run_files("matmul"),
        transfer=run_files("transfer"),
        amp=run_files("amp"),
    output:
        expand(f"{RESULTS}/aggregate/{{table}}.csv", table=TABLES),
        manifest=f"{RESULTS}/aggregate/manifest.json",
    log:
        f"{RESULTS}/logs/aggregate.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        results=lambda wildcards, input: subpath(input.run, ancestor=2),
        out_dir=lambda wildcards, output: subpath(output.manifest, parent=True),
    shell:
        "accelbench aggregate --results {params.results:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule plots:
    input:
        manifest=f"{RESULTS}/aggregate/manifest.json",
    output:
        [
            report(f"{RESULTS}/plots/{p}.png", caption=f"../report/{p}.rst", category="Plots")
            for p in PLOTS
        ],
        [f"{RESULTS}/plots/{p}.svg" for p in PLOTS],
    log:
        f"{RESULTS}/logs/plots.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        aggregate_dir=lambda wildcards, input: subpath(input.manifest, parent=True),
        out_dir=lambda wildcards, output: subpath(output[0], parent=True),
    shell:
        "accelbench plots --aggregate-dir {params.aggregate_dir:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule report:
    input:
        manifest=f"{RESULTS}/aggregate/manifest.json",
        plots=expand(f"{RESULTS}/plots/{{p}}.png", p=PLOTS),
    output:
        report(REPORT_HTML, caption="../report/report.rst", category="Report"),
    log:
        f"{RESULTS}/logs/report.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        aggregate_dir=lambda wildcards, input: subpath(input.manifest, parent=True),
        plots_dir=lambda wildcards, input: subpath(input.plots[0], parent=True),
    shell:
        "accelbench report --aggregate-dir {params.aggregate_dir:q} --plots-dir {params.plots_dir:q}"
        " --out {output:q} > {log:q} 2>&1"
