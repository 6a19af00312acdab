rule run_info:
    output:
        run_path(registry.RUN_FILE),
    log:
        run_path(registry.log_file("run_info")),
    threads: 1
    resources:
        **scheduler_resources(registry.STAGES["run-info"]),
        mem_mb=registry.STAGES["run-info"].mem_mb,
        runtime=registry.STAGES["run-info"].runtime_min,
    params:
        config_json=json.dumps(run_config(config), sort_keys=True),  # compare_to is the report's, not the run's
        run=RUN,
        commit=GIT_COMMIT,
    shell:
        "accelbench run-info --config-json {params.config_json:q} --run {params.run:q}"
        " --git-commit {params.commit:q} --out {output:q} > {log:q} 2>&1"


rule detect:
    input:
        run=run_path(registry.RUN_FILE),
        image=detect_image_record,
    output:
        report(
            run_path(registry.DEVICES_FILE),
            caption="../report/devices.rst",
            category="Devices",
        ),
    log:
        run_path(registry.log_file("detect")),
    container:
        DETECT_CONTAINER
    threads: 1
    resources:
        **scheduler_resources(
            registry.STAGES["detect"],
            backend_of=lambda wildcards: DETECT_BACKEND,
            gpus=lambda wildcards: DETECT_GPUS,
        ),
        mem_mb=registry.STAGES["detect"].mem_mb,
        runtime=registry.STAGES["detect"].runtime_min,
        gpu=DETECT_GPUS,
        gpu_model=lambda wildcards: (
            (config["cluster"]["gpu_model"] or None) if DETECT_GPUS else None
        ),
    params:
        launch=detect_launcher,
    shell:
        "{params.launch} accelbench detect --run-file {input.run:q} --out {output:q} > {log:q} 2>&1"
