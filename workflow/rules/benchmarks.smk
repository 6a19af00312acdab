# Benchmark stages, one job per backend; each job sweeps every visible device of its backend.
# resources: bench=1 lets a profile keep two measurements off the same cores/GPU (--resources bench=1).


rule warmup:
    input:
        run=f"{RUN_DIR}/run.json",
        image=image_record,
        devices=f"{RUN_DIR}/devices.json",
    output:
        f"{RUN_DIR}/warmup_{{backend}}.csv",
    log:
        f"{RUN_DIR}/logs/warmup_{{backend}}.log",
    threads: bench_threads
    resources:
        mem_mb=4000,
        runtime=15,
        gpu=gpu_count,
        gpu_model=gpu_model,
        bench=1,
    params:
        launch=launcher,
    container:
        BENCH_CONTAINER
    shell:
        "{params.launch} accelbench warmup --run-file {input.run:q} --backend {wildcards.backend}"
        " --threads {threads} --out {output:q} > {log:q} 2>&1"


rule matmul:
    input:
        run=f"{RUN_DIR}/run.json",
        image=image_record,
        warmup=f"{RUN_DIR}/warmup_{{backend}}.csv",
    output:
        f"{RUN_DIR}/matmul_{{backend}}.csv",
    log:
        f"{RUN_DIR}/logs/matmul_{{backend}}.log",
    threads: bench_threads
    resources:
        mem_mb=16000,
        runtime=60,
        gpu=gpu_count,
        gpu_model=gpu_model,
        bench=1,
    params:
        launch=launcher,
        checkpoint=f"{RUN_DIR}/checkpoints/matmul_{{backend}}.jsonl",
    container:
        BENCH_CONTAINER
    shell:
        "{params.launch} accelbench matmul --run-file {input.run:q} --backend {wildcards.backend}"
        " --threads {threads} --checkpoint {params.checkpoint:q} --out {output:q} > {log:q} 2>&1"


rule transfer:
    input:
        run=f"{RUN_DIR}/run.json",
        image=image_record,
        matmul=f"{RUN_DIR}/matmul_{{backend}}.csv",
    output:
        f"{RUN_DIR}/transfer_{{backend}}.csv",
    log:
        f"{RUN_DIR}/logs/transfer_{{backend}}.log",
    threads: 1
    resources:
        mem_mb=8000,
        runtime=15,
        gpu=gpu_count,
        gpu_model=gpu_model,
        bench=1,
    params:
        launch=launcher,
    container:
        BENCH_CONTAINER
    shell:
        "{params.launch} accelbench transfer --run-file {input.run:q} --backend {wildcards.backend}"
        " --out {output:q} > {log:q} 2>&1"
