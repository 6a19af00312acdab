# The device stages (accelbench.registry.DEVICE_STAGES, from the plug-ins in registry.PLUGINS), one job per
# backend, each sweeping every visible device of it. They share this one definition, so every one of them
# has the same inputs (run.json, devices.json, the backend's image record), container, launcher, threads,
# resources and log, and none can miss one. On one backend they run one after another, in registry order
# (the input `after`): two measurements never share a device. resources: bench=1 lets a profile keep
# measurements of different backends apart too (--resources bench=1). A stage that uses every device of a node
# (its declared Resources.whole_node) asks for cluster.gpus_per_node GPUs and one host thread per GPU
# (common.smk stage_gpus, stage_threads); the others one GPU.


def device_stage_inputs(stage):
    def inputs(wildcards):
        named = {
            "run": run_path(registry.RUN_FILE),
            "devices": run_path(registry.DEVICES_FILE),
            "image": image_record(wildcards),
        }
        before = registry.previous_device_stage(stage, wildcards.backend)
        if before is not None:
            named["after"] = run_path(
                registry.stage_files(before, wildcards.backend)[0]
            )
        return named

    return inputs


for _stage in registry.DEVICE_STAGES:

    rule:
        name:
            _stage.rule
        input:
            unpack(device_stage_inputs(_stage)),
        output:
            [run_path(pattern) for pattern in registry.stage_outputs(_stage)],  # its tables, then its samples
        log:
            run_path(registry.log_file(_stage.name, "{backend}")),
        container:
            BENCH_CONTAINER
        threads: stage_threads(_stage)
        resources:
            **scheduler_resources(
                _stage,
                backend_of=lambda wildcards: wildcards.backend,
                gpus=stage_gpus(_stage),
            ),
            mem_mb=_stage.mem_mb,
            runtime=_stage.runtime_min,
            gpu=stage_gpus(_stage),
            gpu_model=gpu_model,
            bench=1,
        params:
            launch=launcher,
            stage=_stage.name,
            out_dir=lambda wildcards, output: subpath(output[0], parent=True),
            checkpoint=run_path(registry.checkpoint_file(_stage.name, "{backend}")),
        shell:
            "{params.launch} accelbench {params.stage} --run-file {input.run:q} --backend {wildcards.backend}"
            " --threads {threads} --out-dir {params.out_dir:q} --checkpoint {params.checkpoint:q} > {log:q} 2>&1"
