# Docker/Podman (container.runtime docker|podman): each backend's image is a step of the run. Built once from
# containers/<backend>/Containerfile (container.build: true) or taken as it is (false: pulled if missing), and
# recorded with its id in results/<run>/images/<backend>.json; every rule of that backend depends on the record
# and runs in exactly that image (accelbench container exec). Not in the DAG for runtime none or apptainer.
rule container_image:
    input:
        run=run_path(registry.RUN_FILE),
        sources=image_sources,
    output:
        f"{RUN_DIR}/images/{{backend}}.json",
    log:
        f"{RUN_DIR}/logs/image_{{backend}}.log",
    wildcard_constraints:
        backend="|".join(_containers.IMAGE_BACKENDS),
    localrule: True
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        context=workflow.basedir,
    shell:
        "accelbench container build --run-file {input.run:q} --backend {wildcards.backend}"
        " --context {params.context:q} --out {output:q} > {log:q} 2>&1"
