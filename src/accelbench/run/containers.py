"""Running the benchmark stages inside the CPU, CUDA and ROCm images.

``container.runtime`` in the config picks one of four routes:

- ``none``: every stage runs on the host (the default).
- ``docker`` / ``podman`` (a workstation): the rule ``container_image`` builds
  ``containers/<backend>/Containerfile`` (or takes the configured image as it is, ``container.build: false``)
  and records the image's id in ``results/<run>/images/<backend>.json``. Each benchmark rule's command is
  prefixed by ``accelbench container exec --record <that file> ... --``, which at run time reads the id and
  execs ``docker|podman run ... <id> <command>``: the stage runs in exactly the image that was recorded,
  and every row it writes carries that id (``ACCELBENCH_IMAGE_ID``, read by ``provenance.container_image``).
- ``apptainer`` (a cluster): Snakemake runs the rules in the image itself (``--sdm apptainer``); each
  benchmark rule declares ``container: apptainer_image(config, backend)``. Rows carry the image Apptainer
  reports (``APPTAINER_CONTAINER``). GPUs: ``--apptainer-args --nv`` (CUDA) or ``--rocm`` (profiles/).

Everything that becomes part of a command line is checked here first (runtime, backend, image reference,
paths, environment), and commands are argv lists, never strings run through a shell;
``launch_prefix`` quotes its argv with ``shlex.join`` for the rules' shell lines.

The GPU arguments (``--gpus all``, CDI ``nvidia.com/gpu=all``, ``/dev/kfd`` + ``/dev/dri``) are
**untested on hardware**: this project's CI has no GPU; their exact argv is unit-tested.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import __version__, backends
from .config import (
    BUILD_ARG_VALUE_RE,
    ENGINES,
    RUNTIMES,
    ConfigError,
    check_build_args,
    check_choice,
    check_container_config,
    check_image,
    image_backends,
    with_defaults,
)
from .io import atomic_write_json
from .provenance import CHECKOUT, read_run_info

IMAGE_BACKENDS = image_backends()  # backends with an image under containers/
# Host variables that change what a stage measures; passed into the container when set on the host.
PASS_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "PYTORCH_TUNABLEOP_ENABLED",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "SLURM_JOB_ID",
    "ACCELBENCH_GIT_COMMIT",
)
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
APPTAINER_SCHEMES = (
    "docker://",
    "docker-daemon://",
    "docker-archive:",
    "oci://",
    "oci-archive:",
    "oras://",
    "library://",
    "shub://",
    "https://",
    "http://",
    "file://",
)
REPO_ROOT = CHECKOUT  # the build context: the repository this package runs from


class ContainerError(ConfigError):
    """A container setting or argument that cannot be used; str() is one line naming it."""


# ---- checks ----------------------------------------------------------------------------------------------


def _check_choice(key: str, value, allowed) -> str:
    try:
        return check_choice(key, value, allowed)
    except ConfigError as exc:
        raise ContainerError(str(exc)) from None


def check_path(path: str, key: str) -> str:
    """An absolute host path that can be bind-mounted with ``-v PATH:PATH``."""
    p = str(path)
    if not os.path.isabs(p):
        raise ContainerError(f"{key}: {p!r} must be an absolute path")
    if ":" in p or "," in p or "\n" in p or "\0" in p:
        raise ContainerError(
            f"{key}: {p!r} cannot be bind-mounted (it contains ':', ',' or a newline); "
            "move the working directory to a path without them"
        )
    return p


def check_env(env: dict) -> dict:
    for k, v in env.items():
        if not ENV_NAME_RE.match(k):
            raise ContainerError(f"environment: {k!r} is not a variable name")
        if "\0" in str(v) or "\n" in str(v):
            raise ContainerError(f"environment: {k} contains a newline or NUL")
    return {k: str(v) for k, v in env.items()}


def check_config(config: dict) -> None:
    """``config.check_container_config``, as a ContainerError (one line)."""
    try:
        check_container_config(config)
    except ContainerError:
        raise
    except ConfigError as exc:
        raise ContainerError(str(exc)) from None


# ---- Apptainer: which image each rule declares ---------------------------------------------------------


def apptainer_uri(image: str) -> str:
    """What Snakemake's ``container:`` gets for an image reference: a local path (``.sif``, ``/...``,
    ``./...``) or an URI with a scheme as it is; a plain registry reference becomes ``docker://<ref>``."""
    check_image(image)
    if image.startswith(APPTAINER_SCHEMES) or image.startswith(("/", "./", "../")) or image.endswith((".sif", ".simg")):
        return image
    return f"docker://{image}"


def apptainer_image(config: dict, backend: str) -> str | None:
    """The ``container:`` of a benchmark rule for ``backend``: its image under ``runtime: apptainer``,
    ``None`` (run on the host, or in the image our own launcher starts) otherwise."""
    if config["container"]["runtime"] != "apptainer":
        return None
    _check_choice("backend", backend, IMAGE_BACKENDS)
    return apptainer_uri(config["container"]["images"][backend])


# ---- Docker / Podman: the argv -------------------------------------------------------------------------


def gpu_args(runtime: str, backend: str, device_gids: tuple[int, ...] = (), rootless: bool = False) -> list[str]:
    """Device access for ``backend`` (``Backend.engine_device_args``; untested on hardware). ``rootless``:
    Podman without root, where host groups do not map into the container (ROCm then keeps the user's groups)."""
    _check_choice("runtime", runtime, ENGINES)
    return backends.get(backend).engine_device_args(runtime, device_gids, rootless=rootless)


def user_args(runtime: str, uid: int, gid: int, rootless: bool) -> list[str]:
    """Files written in the mounted folders belong to the host user: ``--user uid:gid`` (Docker, rootful
    Podman); rootless Podman maps the host user to the same uid inside with ``--userns=keep-id``."""
    if not (isinstance(uid, int) and isinstance(gid, int) and uid >= 0 and gid >= 0):
        raise ContainerError(f"user: uid {uid!r} / gid {gid!r} must be integers >= 0")
    if runtime == "podman" and rootless:
        return ["--userns=keep-id"]  # the calling user (uid:gid) keeps its ids inside
    return ["--user", f"{uid}:{gid}"]


def run_argv(
    runtime: str,
    backend: str,
    image: str,
    command: list[str],
    *,
    workdir: str,
    uid: int,
    gid: int,
    env: dict | None = None,
    threads: int | None = None,
    image_id: str | None = None,
    image_ref: str | None = None,
    mounts: tuple[str, ...] = (),
    rootless: bool = False,
    device_gids: tuple[int, ...] = (),
) -> list[str]:
    """``docker|podman run`` argv that runs ``command`` in ``image`` on ``backend``'s devices.

    The working folder (and any extra ``mounts``, e.g. a results folder that is a link to elsewhere) is
    mounted at the same path and is the working directory, so relative paths in the command mean what they
    mean on the host. ``threads`` sets OMP/MKL_NUM_THREADS (Snakemake's grant for the job); ``env`` holds
    host variables to pass on (see ``PASS_ENV``); ``image_id``/``image_ref`` are exported as
    ACCELBENCH_IMAGE_ID / ACCELBENCH_IMAGE so every row records the image. The host name is shared
    (``--uts=host``) so rows name the host, not the container.
    """
    _check_choice("container.runtime", runtime, ENGINES)
    _check_choice("backend", backend, IMAGE_BACKENDS)
    check_image(image, "image")
    if not command or not all(isinstance(a, str) for a in command):
        raise ContainerError("command: must be a non-empty list of strings")
    workdir = check_path(workdir, "workdir")
    all_env = {"HOME": "/tmp", "ACCELBENCH_CONTAINER_RUNTIME": runtime}
    if threads is not None:
        if not isinstance(threads, int) or threads < 1:
            raise ContainerError(f"threads: {threads!r} must be an integer >= 1")
        all_env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    all_env.update(env or {})
    if image_ref:
        all_env["ACCELBENCH_IMAGE"] = check_image(image_ref, "image")
    if image_id:
        all_env["ACCELBENCH_IMAGE_ID"] = check_image(image_id, "image id")
    all_env = check_env(all_env)

    argv = [runtime, "run", "--rm", "--init", "--uts=host"]
    if runtime == "podman":
        argv += ["--security-opt", "label=disable"]  # SELinux hosts: read the bind mounts without relabelling
    argv += user_args(runtime, uid, gid, rootless)
    argv += gpu_args(runtime, backend, device_gids, rootless=rootless)
    for m in dict.fromkeys([workdir, *(check_path(m, "mount") for m in mounts)]):
        argv += ["-v", f"{m}:{m}"]
    argv += ["-w", workdir]
    for k in sorted(all_env):
        argv += ["--env", f"{k}={all_env[k]}"]
    return [*argv, image, *command]


def host_env(environ: dict | None = None) -> dict:
    """The ``PASS_ENV`` variables set on the host."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in PASS_ENV if environ.get(k) not in (None, "")}


def device_node_gids(dev: Path = Path("/dev")) -> tuple[int, ...]:
    """Groups owning /dev/kfd and the /dev/dri render nodes on this host (empty where there are none)."""
    nodes = [dev / "kfd", *sorted((dev / "dri").glob("renderD*"))]
    gids = []
    for node in nodes:
        try:
            gids.append(node.stat().st_gid)
        except OSError:
            pass
    return tuple(g for g in dict.fromkeys(gids) if g != 0)


def extra_mounts(workdir: str) -> tuple[str, ...]:
    """The results folder when it is a link to a place outside the working folder."""
    res = os.path.realpath(os.path.join(workdir, "results"))
    real = os.path.realpath(workdir)
    if os.path.isdir(res) and os.path.commonpath([res, real]) != real:
        return (res,)
    return ()


# ---- what the rules call -------------------------------------------------------------------------------


def image_record_path(run_dir: str, backend: str) -> str:
    return f"{run_dir}/images/{backend}.json"


def launch_prefix(
    config: dict, backend: str, workdir: str, run_dir: str | None = None, threads: int | None = None
) -> str:
    """The shell-quoted prefix of a benchmark rule's command: empty on the host and under Apptainer
    (Snakemake wraps the command itself); for Docker/Podman ``accelbench container exec`` with the record
    of the image built for this run, so the stage runs in that image (see ``exec_record``)."""
    runtime = _check_choice("container.runtime", config["container"]["runtime"], RUNTIMES)
    if runtime not in ENGINES:
        return ""
    _check_choice("backend", backend, IMAGE_BACKENDS)
    if run_dir is None:
        raise ContainerError("launch_prefix: run_dir is needed with container.runtime docker/podman")
    argv = [
        "accelbench",
        "container",
        "exec",
        "--record",
        image_record_path(run_dir, backend),
        "--workdir",
        check_path(workdir, "workdir"),
    ]
    if threads is not None:
        argv += ["--threads", str(int(threads))]
    return shlex.join([*argv, "--"])


def read_record(path: str | Path) -> dict:
    try:
        rec = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ContainerError(f"image record: {str(path)!r} does not exist (built by rule container_image)") from None
    for key in ("runtime", "backend", "image", "id"):
        if not rec.get(key):
            raise ContainerError(f"image record {str(path)!r}: {key!r} is missing")
    return rec


def record_argv(
    record: dict, command: list[str], workdir: str, threads: int | None, environ: dict | None = None
) -> list[str]:
    """The run argv for a recorded image: run by id, exactly the image the record names."""
    runtime = record["runtime"]
    return run_argv(
        runtime,
        record["backend"],
        record["id"],
        command,
        workdir=workdir,
        uid=os.getuid(),
        gid=os.getgid(),
        env=host_env(environ),
        threads=threads,
        image_id=record["id"],
        image_ref=record["image"],
        mounts=extra_mounts(workdir),
        rootless=(runtime == "podman" and os.geteuid() != 0),
        device_gids=device_node_gids(),
    )


# ---- images: build or take, and record -----------------------------------------------------------------


def containerfile(backend: str, context: str | Path = REPO_ROOT) -> Path:
    return Path(context) / "containers" / _check_choice("backend", backend, IMAGE_BACKENDS) / "Containerfile"


def build_argv(
    runtime: str, backend: str, tag: str, *, context: str, build_args: dict | None = None, iidfile: str | None = None
) -> list[str]:
    """``docker|podman build`` of ``containers/<backend>/Containerfile`` with the repository as context.
    Host networking for the build: pip inside reaches the index the way the host does."""
    _check_choice("container.runtime", runtime, ENGINES)
    check_image(tag, "tag")
    argv = [runtime, "build", "--network=host", "-f", str(containerfile(backend, context)), "-t", tag]
    for k, v in check_build_args(build_args or {}).items():
        argv += ["--build-arg", f"{k}={v}"]
    if iidfile:
        argv += ["--iidfile", iidfile]
    return [*argv, str(context)]


def inspect_image(runtime: str, image: str) -> dict:
    out = subprocess.run([runtime, "image", "inspect", image], capture_output=True, text=True)
    if out.returncode != 0:
        raise ContainerError(f"{runtime} image inspect {image}: {out.stderr.strip() or 'failed'}")
    return json.loads(out.stdout)[0]


def _git(context: Path, *args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(context), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except Exception:
        return ""


REMOTE_URL_RE = re.compile(r"^(https?://|ssh://|git://|git@[^/:]+:)")


def default_build_args(context: Path, commit: str = "") -> dict:
    """Labels' values: the package version and the pipeline's commit (and origin, where there is one)."""
    args = {"ACCELBENCH_VERSION": __version__, "VCS_REF": commit or _git(context, "rev-parse", "HEAD") or "unknown"}
    url = _git(context, "remote", "get-url", "origin")
    if url and BUILD_ARG_VALUE_RE.match(url) and REMOTE_URL_RE.match(url):  # not a local path: no use in a label
        args["SOURCE_URL"] = url
    return args


def _run_logged(argv: list[str], log) -> None:
    rc = subprocess.run(argv, stdout=log, stderr=log).returncode
    if rc != 0:
        raise ContainerError(f"{argv[0]} {argv[1]} failed (exit {rc}); its output is above")


def ensure_image(
    runtime: str,
    backend: str,
    image: str,
    *,
    build: bool,
    context: str | Path,
    build_args: dict | None = None,
    commit: str = "",
    log=sys.stderr,
) -> dict:
    """Build (``build``) or take (pull only if missing) the image, and return its record."""
    context = Path(context).resolve()
    args = {**default_build_args(context, commit), **check_build_args(build_args or {})}
    t0 = time.monotonic()
    if build:
        with tempfile.TemporaryDirectory(prefix="accelbench-build-") as tmp:
            iid = Path(tmp) / "iid"
            argv = build_argv(runtime, backend, image, context=str(context), build_args=args, iidfile=str(iid))
            print("+", shlex.join(argv), file=log, flush=True)
            _run_logged(argv, log)
            image_id = iid.read_text().strip()
    else:
        if subprocess.run([runtime, "image", "inspect", image], capture_output=True).returncode != 0:
            print("+", shlex.join([runtime, "pull", image]), file=log, flush=True)
            _run_logged([runtime, "pull", image], log)
        image_id = inspect_image(runtime, image)["Id"]
    info = inspect_image(runtime, image_id)
    return {
        "runtime": runtime,
        "backend": backend,
        "image": image,
        "id": info["Id"],  # the runtime's own spelling (docker: sha256:<hex>, podman: <hex>)
        "digest": info.get("Digest") or "",
        "repo_digests": info.get("RepoDigests") or [],
        "created": info.get("Created") or "",
        "labels": (info.get("Config") or {}).get("Labels") or info.get("Labels") or {},
        "built": build,
        "containerfile": str(containerfile(backend, context).relative_to(context)) if build else "",
        "build_args": args if build else {},
        "seconds": round(time.monotonic() - t0, 1),
    }


# ---- CLI -----------------------------------------------------------------------------------------------


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    b = sub.add_parser(
        "build",
        help="build (or take) a backend's image and record its id",
        description="Build containers/<backend>/Containerfile with docker/podman (or take the "
        "image as it is with --no-build) and write its record (id, digest, tag, build "
        "args). With --run-file the runtime, tag, build and build args come from the "
        "run's config; flags override.",
    )
    b.add_argument("--backend", required=True, choices=IMAGE_BACKENDS)
    b.add_argument("--run-file", help="results/<run>/run.json: take container settings from its config")
    b.add_argument("--runtime", choices=ENGINES)
    b.add_argument("--tag", help="image reference to build or take (default: container.images.<backend>)")
    b.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument(
        "--no-build", dest="build", action="store_false", default=None, help="take the image as it is (pull if missing)"
    )
    b.add_argument("--context", default=str(REPO_ROOT), help="build context: the repository (default: %(default)s)")
    b.add_argument("--out", help="write the record here (default: print it)")

    for name, help_ in (
        ("exec", "run a command in a recorded image (what the rules call)"),
        ("argv", "print the docker/podman argv that would run a command"),
    ):
        e = sub.add_parser(name, help=help_, description=help_)
        e.add_argument("--record", help="results/<run>/images/<backend>.json written by `container build`")
        if name == "argv":
            e.add_argument("--runtime", choices=ENGINES)
            e.add_argument("--backend", choices=IMAGE_BACKENDS)
            e.add_argument("--image")
        e.add_argument("--workdir", help="mounted at the same path and used as working directory (default: cwd)")
        e.add_argument("--threads", type=int, help="OMP_NUM_THREADS/MKL_NUM_THREADS in the container")
        e.add_argument("command", nargs="+", help="the command, after --")


def _parse_build_args(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ContainerError(f"--build-arg: {item!r} must be KEY=VALUE")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def cli(args) -> int:
    try:
        if args.action == "build":
            return _cli_build(args)
        workdir = os.path.abspath(args.workdir or os.getcwd())
        if args.action == "argv" and not args.record:
            if not (args.runtime and args.backend and args.image):
                raise ContainerError("argv: give --record, or --runtime, --backend and --image")
            record = {"runtime": args.runtime, "backend": args.backend, "image": args.image, "id": args.image}
        else:
            if not args.record:
                raise ContainerError("exec: --record is required")
            record = read_record(args.record)
        argv = record_argv(record, args.command, workdir, args.threads)
        if args.action == "argv":
            print(shlex.join(argv))
            return 0
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvp(argv[0], argv)
    except ContainerError as exc:
        print(f"accelbench container: {exc}", file=sys.stderr)
        return 2
    return 0  # pragma: no cover (execvp does not return)


def _cli_build(args) -> int:
    settings = with_defaults({"container": {}})["container"]
    commit = ""
    if args.run_file:
        info = read_run_info(args.run_file)
        settings = info["config"]["container"]
        commit = (info.get("git_commit") or "").removesuffix("+dirty")
    runtime = args.runtime or settings["runtime"]
    if runtime not in ENGINES:
        raise ContainerError(
            f"container.runtime: {runtime!r} does not build images here; allowed: {', '.join(ENGINES)} "
            "(Apptainer: see docs/containers.md)"
        )
    tag = check_image(args.tag or settings["images"][args.backend], f"container.images.{args.backend}")
    build = settings.get("build", True) if args.build is None else args.build
    build_args = {**settings.get("build_args", {}).get(args.backend, {}), **_parse_build_args(args.build_arg)}
    record = ensure_image(
        runtime, args.backend, tag, build=build, context=args.context, build_args=build_args, commit=commit
    )
    if args.out:
        atomic_write_json(args.out, record)
    print(json.dumps(record, indent=2, sort_keys=True))
    return 0
