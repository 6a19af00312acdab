# AMP vs FP32 training trials, one job per backend (every visible device of it). After matmul so the
# two never measure on the same device at once. A killed job resumes from its checkpoint (finished trials).
rule amp:
    input:
        run=f"{RUN_DIR}/run.json",
        devices=f"{RUN_DIR}/devices.json",
        matmul=f"{RUN_DIR}/matmul_{{backend}}.csv",
    output:
        steps=f"{RUN_DIR}/amp_{{backend}}_steps.csv",
        trials=f"{RUN_DIR}/amp_{{backend}}_trials.csv",
        summary=f"{RUN_DIR}/amp_{{backend}}_summary.csv",
    log:
        f"{RUN_DIR}/logs/amp_{{backend}}.log",
    threads: bench_threads
    resources:
        mem_mb=8000,
        runtime=60,
        gpu=gpu_count,
        gpu_model=gpu_model,
        bench=1,
    params:
        launch=launcher,
        checkpoint=f"{RUN_DIR}/checkpoints/amp_{{backend}}.jsonl",
    shell:
        "{params.launch} accelbench amp --run-file {input.run:q} --devices {input.devices:q}"
        " --backend {wildcards.backend} --threads {threads} --checkpoint {params.checkpoint:q}"
        " --steps-out {output.steps:q} --trials-out {output.trials:q} --summary-out {output.summary:q} > {log:q} 2>&1"
