# Docker/Podman (container.runtime docker|podman): each backend's image is a step of the run. Built once from
# containers/<backend>/Containerfile (container.build: true) or taken as it is (false: pulled if missing), and
# recorded with its id in results/<run>/images/<backend>.json; every rule of that backend depends on the record
# and runs in exactly that image (accelbench container exec). Not in the DAG for runtime none or apptainer.
from pathlib import Path as _Path


def image_sources(wildcards):
    """What the image is built from: a change to any of them rebuilds it (and reruns its backend)."""
    if not config["container"]["build"]:
        return []
    base = _Path(workflow.basedir)
    src = [p for p in (base / "src" / "accelbench").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return [str(base / "containers" / wildcards.backend / "Containerfile"), str(base / "pyproject.toml"),
            *sorted(map(str, src))]


rule container_image:
    input:
        run=f"{RUN_DIR}/run.json",
        sources=image_sources,
    output:
        f"{RUN_DIR}/images/{{backend}}.json",
    log:
        f"{RUN_DIR}/logs/image_{{backend}}.log",
    wildcard_constraints:
        backend="cpu|cuda|rocm",
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
