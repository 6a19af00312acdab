rule run_info:
    output:
        f"{RUN_DIR}/run.json",
    log:
        f"{RUN_DIR}/logs/run_info.log",
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        config_json=json.dumps(config, sort_keys=True),
        run=RUN,
        commit=GIT_COMMIT,
    shell:
        "accelbench run-info --config-json {params.config_json:q} --run {params.run:q}"
        " --git-commit {params.commit:q} --out {output:q} > {log:q} 2>&1"


rule detect:
    input:
        run=f"{RUN_DIR}/run.json",
        image=detect_image_record,
    output:
        report(f"{RUN_DIR}/devices.json", caption="../report/devices.rst", category="Devices"),
    log:
        f"{RUN_DIR}/logs/detect.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
        gpu=DETECT_GPUS,
        gpu_model=lambda wildcards: (config["cluster"]["gpu_model"] or None) if DETECT_GPUS else None,
    params:
        launch=detect_launcher,
    container:
        DETECT_CONTAINER
    shell:
        "{params.launch} accelbench detect --run-file {input.run:q} --out {output:q} > {log:q} 2>&1"
