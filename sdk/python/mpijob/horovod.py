"""elastic_horovod_job: an elastic Horovod MPIJob in one call, with the
horovodrun flags that agree with its elasticPolicy."""

from typing import Dict, List, Optional, Sequence, Union

from kubernetes import client as k8s

from . import models
from .client import admission_message, check_replicas
from .errors import InvalidError

DISCOVERY_SCRIPT = "/etc/mpi/discover_hosts.sh"
GPU_RESOURCE = "nvidia.com/gpu"


def horovodrun_command(
    command: Sequence[str],
    initial_workers: int,
    min_workers: int,
    max_workers: int,
    slots_per_worker: int = 1,
    version: str = "v1",
    blacklist_cooldown: Optional[Sequence[int]] = (10, 100),
) -> List[str]:
    """The launcher's command: horovodrun with -np, --min-np and --max-np
    as the workers times their slots, the operator's discovery script and,
    for v2beta1 (whose script prints no slots), --slots-per-host. A
    blacklist cooldown lets a host that failed once come back; None leaves
    Horovod's default (blacklisted for good)."""
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


# SSHD_COMMAND runs sshd in the foreground in a v2beta1 worker. The operator
# mounts the job's SSH keys from a Secret, whose directory sshd's StrictModes
# would refuse; the host keys and the privilege separation directory are
# made if the image lacks them.
SSHD_COMMAND = ["/bin/sh", "-c", "mkdir -p /run/sshd && ssh-keygen -A && exec /usr/sbin/sshd -De -o StrictModes=no"]


def elastic_horovod_job(
    name: str,
    image: str,
    command: Sequence[str],
    initial_workers: int,
    min_workers: int,
    max_workers: int,
    slots_per_worker: Optional[int] = None,
    gpus_per_worker: int = 0,
    resources: Optional[Dict[str, Union[str, int]]] = None,
    launcher_resources: Optional[Dict[str, Union[str, int]]] = None,
    namespace: Optional[str] = None,
    labels: Optional[Dict[str, str]] = None,
    drain_seconds: Optional[int] = None,
    env: Optional[Dict[str, str]] = None,
    version: str = "v1",
    blacklist_cooldown: Optional[Sequence[int]] = (10, 100),
    worker_command: Optional[Sequence[str]] = None,
):
    """Builds (does not create) an elastic Horovod MPIJob.

    Args:
        name: the job's name.
        image: the image of the launcher and the workers.
        command: the training program, e.g. ``["python", "train.py"]``;
            the launcher runs it through horovodrun.
        initial_workers, min_workers, max_workers: the workers at the
            start and the bounds of scaling (spec.elasticPolicy).
        slots_per_worker: ranks per worker; by default the worker's GPUs,
            or 1 without GPUs.
        gpus_per_worker: nvidia.com/gpu limit of each worker.
        resources: limits (and requests) of each worker container, e.g.
            ``{"cpu": 4, "memory": "16Gi"}``.
        launcher_resources: the same for the launcher container.
        namespace, labels: the job's metadata.
        drain_seconds: how long a removed worker stays out of the
            discovery script before its pod goes (operator default 30).
        env: environment of every container.
        version: ``v1`` or ``v2beta1``.
        blacklist_cooldown: horovodrun's --blacklist-cooldown-range.
        worker_command: what each worker runs. Under v1 the launcher
            reaches the workers through ``kubectl exec``, and by default
            they run the image's own command. Under v2beta1 it reaches
            them over SSH, and by default they run SSHD_COMMAND: sshd in
            the foreground, which images such as horovod's ship without
            starting. An empty list keeps the image's own command (for
            images that start sshd themselves, as upstream's do).

    Returns the job model of that version. Inconsistent bounds raise
    InvalidError with the admission rules' messages; other bad arguments
    ValueError.
    """
    m = {"v1": models.v1, "v2beta1": models.v2beta1}[version]
    prefix = "V1" if version == "v1" else "V2beta1"
    cls = {n[len(prefix):]: c for n, c in m.MODELS.items()}
    if not command:
        raise ValueError("command must name the training program")
    if gpus_per_worker < 0:
        raise ValueError("gpus_per_worker must be 0 or more")
    slots = slots_per_worker or gpus_per_worker or 1
    if slots < 1:
        raise ValueError("slots_per_worker must be 1 or more")
    policy = cls["ElasticPolicy"](min_replicas=min_workers, max_replicas=max_workers, drain_seconds=drain_seconds)
    if min_workers > max_workers:
        field = "spec.elasticPolicy.minReplicas"
        raise InvalidError(admission_message(m.VALIDATION_MESSAGES, field, "more than"), status=422, reason="Invalid")

    worker_limits = dict(resources or {})
    if gpus_per_worker:
        worker_limits[GPU_RESOURCE] = gpus_per_worker
    env_vars = [k8s.V1EnvVar(name=k, value=v) for k, v in sorted((env or {}).items())] or None
    launcher = k8s.V1Container(
        name="launcher",
        image=image,
        command=horovodrun_command(command, initial_workers, min_workers, max_workers, slots, version, blacklist_cooldown),
        env=env_vars,
        resources=_requirements(launcher_resources),
    )
    if worker_command is None:
        worker_command = SSHD_COMMAND if version != "v1" else []
    worker = k8s.V1Container(
        name="worker",
        image=image,
        command=list(worker_command) or None,
        env=env_vars,
        resources=_requirements(worker_limits),
    )
    spec_args = {}
    if version != "v1":
        spec_args["mpi_implementation"] = "OpenMPI"
    job = cls["MPIJob"](
        api_version=m.API_VERSION,
        kind=m.KIND,
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=cls["MPIJobSpec"](
            slots_per_worker=slots,
            elastic_policy=policy,
            mpi_replica_specs=cls["MPIReplicaSpecs"](
                launcher=cls["ReplicaSpec"](replicas=1, template=_template(launcher)),
                worker=cls["ReplicaSpec"](replicas=initial_workers, template=_template(worker)),
            ),
            **spec_args,
        ),
    )
    check_replicas(job, initial_workers, m.VALIDATION_MESSAGES)
    return job


def _template(container: k8s.V1Container) -> k8s.V1PodTemplateSpec:
    return k8s.V1PodTemplateSpec(spec=k8s.V1PodSpec(containers=[container]))


def _requirements(limits: Optional[Dict[str, Union[str, int]]]) -> Optional[k8s.V1ResourceRequirements]:
    if not limits:
        return None
    values = {k: str(v) for k, v in sorted(limits.items())}
    return k8s.V1ResourceRequirements(limits=values, requests=dict(values))
