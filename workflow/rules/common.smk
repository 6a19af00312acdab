# Helpers shared by all .smk files: config check, run id, paths, threads, resources, launcher.
# Every name (stages, tables, figures, files) comes from accelbench.registry; everything that differs
# between device kinds from accelbench.backends.
import json
import os
import re
import socket
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(workflow.basedir, "src"))
from accelbench import backends, registry  # noqa: E402
from accelbench.run import containers as _containers  # noqa: E402
from accelbench.run.config import (
    ConfigError,
    check as check_config,
    check_compare_to,
    run_config,  # noqa: E402
    with_defaults,
)
from accelbench.run.provenance import git_commit as _git_commit  # noqa: E402

# ---- config: checked before any job, one line naming the key on error ---------------
try:
    check_config(config)
except ConfigError as exc:
    sys.exit(f"accelbench: config error: {exc}")
# fill the defaults from the whole schema: the schema file's and each plug-in's own config section
# (registry: Stage.schema, Stage.defaults), which snakemake's validate of the file alone would not know
config.update(with_defaults(config))


def _run_id():
    if config["run"]:
        return config["run"]
    # within the schema's rule for run ids (starts with a letter or digit, at most 64 characters)
    host = (
        re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname().split(".")[0])[:48].lstrip(
            "._-"
        )
        or "host"
    )
    return f"{host}-{config['container']['runtime']}"


RUN = _run_id()
RESULTS = registry.RESULTS
RUN_DIR = f"{RESULTS}/{RUN}"
BACKENDS = config["backends"]
GPU_BACKENDS = [b for b in BACKENDS if backends.CLASSES[b].needs_gpu_resource]
REPORT_HTML = f"{RESULTS}/{registry.REPORT_HTML}"
AGGREGATE_DIR = f"{RESULTS}/{registry.AGGREGATE_DIR}"
PLOTS_DIR = f"{RESULTS}/{registry.PLOTS_DIR}"
# The pipeline checkout's commit, marked dirty when tracked files differ from it.
GIT_COMMIT = _git_commit(workflow.basedir)


def run_path(name):
    return f"{RUN_DIR}/{name}"


def bench_threads(wildcards):
    """CPU stages measure with every core they are granted (snakemake caps this at --cores);
    accelerator stages need one host thread to feed the device (Backend.host_threads).
    """
    threads = backends.CLASSES[wildcards.backend].host_threads
    return (
        threads
        if threads is not None
        else (config["cpu_threads"] or (os.cpu_count() or 1))
    )


def gpu_count(wildcards):
    """SLURM's --gpus / local --resources gpu=N: one GPU stage holds the GPUs it sweeps.
    Other backends leave gpu unset (None, not 0): some executors (Kubernetes) treat any gpu
    resource, even 0, as a GPU job."""
    return 1 if backends.CLASSES[wildcards.backend].needs_gpu_resource else None


def stage_gpus(stage):
    """The gpu resource of a device stage's job: one GPU on GPU backends; a stage that uses every device of a
    node at once (its declared Resources.whole_node) asks for config cluster.gpus_per_node of them (SLURM
    --gpus=N). None on other backends."""

    def gpus(wildcards):
        if not gpu_count(wildcards):
            return None
        return config["cluster"]["gpus_per_node"] if stage.whole_node else 1

    return gpus


def stage_threads(stage):
    """Threads of a device stage's job (snakemake threads -> SLURM --cpus-per-task): bench_threads, and for a
    whole-node stage on an accelerator one host thread per GPU it holds (one per rank).
    """

    def threads(wildcards):
        base = bench_threads(wildcards)
        gpus = stage_gpus(stage)(wildcards)
        host = backends.CLASSES[wildcards.backend].host_threads
        return host * gpus if gpus and host is not None else base

    return threads


def gpu_model(wildcards):
    """SLURM plugin resource gpu_model (-> sbatch --gpus=<model>:1) for GPU stages when
    config cluster.gpu_model names one; None (unset) otherwise, so CPU stages never ask for a GPU.
    """
    return (config["cluster"]["gpu_model"] or None) if gpu_count(wildcards) else None


# detect runs where the GPU stages run, so devices.json describes their GPUs, not a CPU node's.
DETECT_GPUS = 1 if GPU_BACKENDS else None


# ---- what a job asks of a cluster scheduler (the example profiles under profiles/ name no backend, no stage) ----
def scheduler_resources(stage, backend_of=None, gpus=None):
    """The executor-specific resources of one rule's jobs, from the stage's declaration (Resources: memory,
    runtime) and the backend classes (Backend.needs_gpu_resource through ``gpus``, Backend.gpu_manufacturer,
    Backend.is_accelerator), so an XPU job asks for a GPU as a CUDA one does:

    - HTCondor: request_gpus, htcondor_request_mem_mb, allowed_execute_duration (seconds);
    - LSF: lsf_extra (-gpu num=N; -x, the node to itself, for a benchmark on the host);
    - SGE: sge_gpu (-l gpu=N or empty), sge_mem_per_slot (h_vmem is per slot: mem_mb / threads);
    - SLURM: slurm_extra (--exclusive for a benchmark on the host: another job on its cores would be measured too);
    - Kubernetes: gpu_manufacturer (nvidia, amd) of a GPU job.

    ``backend_of(wildcards)``: the backend the job runs on (None: none, a bookkeeping job); ``gpus(wildcards)``: the
    GPUs it holds (None: no GPU). A profile or the command line can still override any of them (--set-resources).
    """
    mem, minutes = stage.mem_mb, stage.runtime_min
    gpus = gpus or (lambda wildcards: None)
    backend_of = backend_of or (lambda wildcards: None)

    def on_host(wildcards):
        backend = backend_of(wildcards)
        return (
            stage.kind == "device"
            and backend is not None
            and not backends.is_accelerator(backend)
            and stage.applies_to(backend)
        )

    def manufacturer(wildcards):
        backend = backend_of(wildcards)
        return (
            backends.CLASSES[backend].gpu_manufacturer
            if backend and gpus(wildcards)
            else None
        )

    return {
        "request_gpus": lambda wildcards: gpus(wildcards),
        "htcondor_request_mem_mb": str(mem),
        "allowed_execute_duration": str(60 * minutes),
        "lsf_extra": lambda wildcards: (
            f"-gpu num={gpus(wildcards)}"
            if gpus(wildcards)
            else ("-x" if on_host(wildcards) else None)
        ),
        "sge_gpu": lambda wildcards: (
            f"-l gpu={gpus(wildcards)}" if gpus(wildcards) else ""
        ),
        "sge_mem_per_slot": lambda wildcards, threads: max(1, mem // max(1, threads)),
        "slurm_extra": lambda wildcards: "--exclusive" if on_host(wildcards) else None,
        "gpu_manufacturer": manufacturer,
    }


# ---- containers (accelbench.run.containers; docs/containers.md) ---------------------------------------
# none: on the host. docker/podman: rule container_image (containers.smk) builds or takes each backend's
# image and records its id; the backend's rules depend on that record and run their command through
# `accelbench container exec`, which starts exactly that image. apptainer: snakemake itself runs the
# device rules in the image (--sdm apptainer), from each rule's `container:`.
RUNTIME = config["container"]["runtime"]
try:
    _containers.check_config(config)
except ConfigError as exc:
    sys.exit(f"accelbench: config error: {exc}")
if RUNTIME == "apptainer":
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    if DeploymentMethod.APPTAINER not in workflow.deployment_settings.deployment_method:
        sys.exit(
            "accelbench: config error: container.runtime: apptainer needs `snakemake --sdm apptainer` "
            "(or --profile profiles/apptainer-<cpu|cuda|rocm>); without it every rule "
            "would run on the host"
        )
# detect runs in the image (and on the devices) of the first GPU backend, else of the first backend.
DETECT_BACKEND = GPU_BACKENDS[0] if GPU_BACKENDS else BACKENDS[0]


def _image_record(backend):
    if RUNTIME not in _containers.ENGINES:
        return []
    return [_containers.image_record_path(RUN_DIR, backend)]


def image_record(wildcards):
    """Input of a device rule: its backend's image record (docker/podman only; nothing otherwise)."""
    return _image_record(wildcards.backend)


def detect_image_record(wildcards):
    return _image_record(DETECT_BACKEND)


def _launch(backend, threads):
    return _containers.launch_prefix(
        config, backend, workdir=os.getcwd(), run_dir=RUN_DIR, threads=threads
    )


def launcher(wildcards, threads):
    """Prefix of a device rule's command that runs it in the backend's Docker/Podman image with
    OMP_NUM_THREADS=threads; empty on the host and under Apptainer. Quoted by accelbench.run.containers.
    """
    return _launch(wildcards.backend, threads)


def detect_launcher(wildcards, threads):
    return _launch(DETECT_BACKEND, threads)


def _apptainer_container(wildcards):
    return _containers.apptainer_image(config, wildcards.backend)


# `container:` of the device rules: the backend's image under runtime apptainer, none otherwise.
BENCH_CONTAINER = _apptainer_container if RUNTIME == "apptainer" else None
DETECT_CONTAINER = (
    _containers.apptainer_image(config, DETECT_BACKEND)
    if RUNTIME == "apptainer"
    else None
)


def image_sources(wildcards):
    """What the image is built from: a change to any of them rebuilds it (and reruns its backend)."""
    if not config["container"]["build"]:
        return []
    base = Path(workflow.basedir)
    src = [
        p
        for p in (base / "src" / "accelbench").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    return [
        str(base / "containers" / wildcards.backend / "Containerfile"),
        str(base / "pyproject.toml"),
        *sorted(map(str, src)),
    ]
