"""elastic_horovod_job: an elastic Horovod MPIJob in one call, with the
horovodrun flags that agree with its elasticPolicy. What a call leaves open
is set from job-defaults.json, as ``kubectl mpijob submit`` sets it
(docs/job-defaults.md)."""

from typing import Dict, List, Optional, Sequence, Union

from kubernetes import client as k8s

from . import job_defaults, models
from .client import admission_message, check_replicas
from .errors import InvalidError

DISCOVERY_SCRIPT = job_defaults.DISCOVERY_SCRIPT
GPU_RESOURCE = job_defaults.GPU_RESOURCE


def horovodrun_command(
    command: Sequence[str],
    initial_workers: int,
    min_workers: int,
    max_workers: int,
    slots_per_worker: int = 1,
    version: str = "v1",
    blacklist_cooldown: Optional[Sequence[int]] = job_defaults.BLACKLIST_COOLDOWN,
) -> List[str]:
    """The launcher's command: horovodrun with -np, --min-np and --max-np
    as the workers times their slots, the operator's discovery script and,
    for v2beta1 (whose script prints no slots), --slots-per-host. A
    blacklist cooldown (by default 10 to 100 seconds) lets a host that
    failed once come back; None or an empty one leaves Horovod's default
    (blacklisted for good)."""
    args = [
        "horovodrun",
        "-np", str(initial_workers * slots_per_worker),
        "--min-np", str(min_workers * slots_per_worker),
        "--max-np", str(max_workers * slots_per_worker),
        "--host-discovery-script", DISCOVERY_SCRIPT,
    ]  # fmt: skip
    if version != "v1":
        args += ["--slots-per-host", str(slots_per_worker)]
    if blacklist_cooldown:
        args += ["--blacklist-cooldown-range"] + [str(v) for v in blacklist_cooldown]
    return args + list(command)


# SSHD_COMMAND runs sshd in the foreground in a v2beta1 worker, as one
# command line; the built job gives its first two words as the container's
# command and the script as its argument. The operator mounts the job's SSH
# keys from a Secret, whose directory sshd's StrictModes would refuse; the
# host keys and the privilege separation directory are made if the image
# lacks them.
SSHD_COMMAND = job_defaults.V2BETA1_WORKER_COMMAND + job_defaults.V2BETA1_WORKER_ARGS


def elastic_horovod_job(
    name: str,
    image: str,
    command: Sequence[str],
    initial_workers: int,
    min_workers: Optional[int] = None,
    max_workers: Optional[int] = None,
    slots_per_worker: Optional[int] = None,
    gpus_per_worker: int = 0,
    resources: Optional[Dict[str, Union[str, int]]] = None,
    launcher_resources: Optional[Dict[str, Union[str, int]]] = None,
    namespace: Optional[str] = None,
    labels: Optional[Dict[str, str]] = None,
    drain_seconds: Optional[int] = None,
    env: Optional[Dict[str, str]] = None,
    version: str = "v1",
    blacklist_cooldown: Optional[Sequence[int]] = job_defaults.BLACKLIST_COOLDOWN,
    worker_command: Optional[Sequence[str]] = None,
    annotations: Optional[Dict[str, str]] = None,
):
    """Builds (does not create) an elastic Horovod MPIJob, the job that
    ``kubectl mpijob submit`` builds of the same request.

    Args:
        name: the job's name.
        image: the image of the launcher and the workers.
        command: the training program, e.g. ``["python", "train.py"]``;
            the launcher runs it through horovodrun.
        initial_workers: the workers at the start.
        min_workers, max_workers: the bounds of scaling
            (spec.elasticPolicy); by default 1 and ``initial_workers``.
        slots_per_worker: ranks per worker; by default the worker's GPUs,
            or 1 without GPUs.
        gpus_per_worker: nvidia.com/gpu limit of each worker.
        resources: limits and requests of each worker container, e.g.
            ``{"cpu": 4, "memory": "16Gi"}``.
        launcher_resources: the same for the launcher container.
        namespace: the job's namespace.
        labels, annotations: on the job and on the pod templates of the
            launcher and the workers alike, so that the pods carry them
            too (for label selectors, and tools that count a team's pods).
        drain_seconds: how long a removed worker stays out of the
            discovery script before its pod goes; by default 30, the
            operator's default.
        env: environment of every container, in the order given (a
            variable may refer to one before it as ``$(NAME)``).
        version: ``v1`` or ``v2beta1``.
        blacklist_cooldown: horovodrun's --blacklist-cooldown-range; None
            leaves it out.
        worker_command: what each worker runs. Under v1 the launcher
            reaches the workers through ``kubectl exec``, and by default
            they run the image's own command. Under v2beta1 it reaches
            them over SSH, and by default they run SSHD_COMMAND: sshd in
            the foreground, which images such as horovod's ship without
            starting. An empty list keeps the image's own command (for
            images that start sshd themselves, as upstream's do).

    The containers are named ``mpi-launcher`` and ``mpi-worker``, and the
    job's cleanPodPolicy is Running: its workers go once it has finished.

    Returns the job model of that version. Bounds that contradict each
    other or the workers raise InvalidError with the admission rules'
    messages; a version other than v1 and v2beta1, an empty command, or
    fewer than 0 GPUs or 1 slot raise ValueError.
    """
    if version not in ("v1", "v2beta1"):
        raise ValueError("version must be v1 or v2beta1, not %r" % (version,))
    m = {"v1": models.v1, "v2beta1": models.v2beta1}[version]
    prefix = "V1" if version == "v1" else "V2beta1"
    cls = {n[len(prefix) :]: c for n, c in m.MODELS.items()}
    if not command:
        raise ValueError("command must name the training program")
    if gpus_per_worker < 0:
        raise ValueError("gpus_per_worker must be 0 or more")
    slots = slots_per_worker or gpus_per_worker or 1
    if slots < 1:
        raise ValueError("slots_per_worker must be 1 or more")
    min_workers = job_defaults.MIN_REPLICAS if min_workers is None else min_workers
    max_workers = initial_workers if max_workers is None else max_workers
    if min_workers > max_workers:
        field = "spec.elasticPolicy.minReplicas"
        raise InvalidError(admission_message(m.VALIDATION_MESSAGES, field, "more than"), status=422, reason="Invalid")
    policy = cls["ElasticPolicy"](
        min_replicas=min_workers,
        max_replicas=max_workers,
        drain_seconds=job_defaults.DRAIN_SECONDS if drain_seconds is None else drain_seconds,
    )

    def env_vars():  # each container its own list
        return [k8s.V1EnvVar(name=k, value=v) for k, v in (env or {}).items()] or None

    launcher = k8s.V1Container(
        name=job_defaults.LAUNCHER_CONTAINER,
        image=image,
        command=horovodrun_command(command, initial_workers, min_workers, max_workers, slots, version, blacklist_cooldown),
        env=env_vars(),
        resources=_requirements(launcher_resources),
    )
    worker = k8s.V1Container(name=job_defaults.WORKER_CONTAINER, image=image, env=env_vars(), resources=_requirements(resources, gpus_per_worker))
    _set_worker_command(worker, version, worker_command)
    spec = cls["MPIJobSpec"](
        slots_per_worker=slots,
        elastic_policy=policy,
        mpi_replica_specs=cls["MPIReplicaSpecs"](
            launcher=cls["ReplicaSpec"](replicas=1, template=_template(launcher, labels, annotations)),
            worker=cls["ReplicaSpec"](replicas=initial_workers, template=_template(worker, labels, annotations)),
        ),
    )
    if version == "v1":
        spec.clean_pod_policy = job_defaults.CLEAN_POD_POLICY
    else:
        spec.run_policy = cls["RunPolicy"](clean_pod_policy=job_defaults.CLEAN_POD_POLICY)
    meta = k8s.V1ObjectMeta(name=name, namespace=namespace, labels=_copy(labels), annotations=_copy(annotations))
    job = cls["MPIJob"](api_version=m.API_VERSION, kind=m.KIND, metadata=meta, spec=spec)
    check_replicas(job, initial_workers, m.VALIDATION_MESSAGES)
    return job


def _set_worker_command(worker: k8s.V1Container, version: str, worker_command: Optional[Sequence[str]]) -> None:
    """The worker's command: the one given (none for an empty one), else
    under v2beta1 sshd in the foreground, else the image's own."""
    if worker_command is not None:
        worker.command = list(worker_command) or None
    elif version != "v1":
        worker.command = list(job_defaults.V2BETA1_WORKER_COMMAND)
        worker.args = list(job_defaults.V2BETA1_WORKER_ARGS)


def _template(container: k8s.V1Container, labels: Optional[Dict[str, str]], annotations: Optional[Dict[str, str]]) -> k8s.V1PodTemplateSpec:
    """A pod template of the container, with its own copy of the labels
    and annotations (none for empty ones)."""
    meta = None
    if labels or annotations:
        meta = k8s.V1ObjectMeta(labels=_copy(labels), annotations=_copy(annotations))
    return k8s.V1PodTemplateSpec(metadata=meta, spec=k8s.V1PodSpec(containers=[container]))


def _copy(values: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    """A copy of a map of strings; None for an empty one."""
    return dict(values) if values else None


def _requirements(amounts: Optional[Dict[str, Union[str, int]]], gpus: int = 0) -> Optional[k8s.V1ResourceRequirements]:
    """Each amount as a limit and a request alike; GPUs, an extended
    resource, as a limit only (the API server copies it into the
    requests)."""
    values = {k: str(v) for k, v in sorted((amounts or {}).items())}
    limits = dict(values)
    if gpus:
        limits[GPU_RESOURCE] = str(gpus)
    if not limits:
        return None
    return k8s.V1ResourceRequirements(limits=dict(sorted(limits.items())), requests=values or None)
