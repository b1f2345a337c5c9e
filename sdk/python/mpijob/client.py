"""MPIJobClient: MPIJobs through the official Kubernetes Python client."""

import datetime
import os
import re
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from . import models
from .errors import APIError, InvalidError, JobFailedError, MPIJobError, NotFoundError, WaitTimeoutError
from .hosts import Host, Worker, parse_discover_hosts, parse_time

GROUP = "kubeflow.org"
PLURAL = "mpijobs"
DRAINING_SINCE = "mpi-operator.kubeflow.org/draining-since"
LAUNCHER_SUFFIX = "-launcher"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)

# Per API version: the models and how the operator labels a job's pods.
_VERSIONS = {
    "v1": {
        "models": models.v1,
        "job": models.v1.V1MPIJob,
        "job_label": "mpi-job-name",
        "role_label": "mpi-job-role",
        "index_labels": ("replica-index", "training.kubeflow.org/replica-index"),
        # The launcher is a pod named <job>-launcher.
        "launcher_job": False,
        # The condition types a job of this version can have: the API's
        # and the operator's own (Resizing, Blocked).
        "conditions": ("Created", "Running", "Restarting", "Succeeded", "Failed", "Resizing", "Blocked"),
    },
    "v2beta1": {
        "models": models.v2beta1,
        "job": models.v2beta1.V2beta1MPIJob,
        "job_label": "training.kubeflow.org/job-name",
        "role_label": "training.kubeflow.org/job-role",
        # By name: with the launcher as a worker, the replica-index label
        # is the worker's index plus one.
        "index_labels": (),
        # The launcher is a batch/v1 Job named <job>-launcher, whose pods
        # have generated names.
        "launcher_job": True,
        "conditions": ("Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended", "Resizing", "Blocked"),
    },
}

JobLike = Union[models.Model, Dict[str, Any], str, "os.PathLike[str]"]


def _api_call(fn: Callable[..., Any], *args, **kwargs) -> Any:
    """Calls the kubernetes client, turning its ApiException into APIError."""
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        raise APIError.from_api_exception(exc) from None


def condition_true(job, condition_type: str) -> bool:
    """Whether the job's status holds a condition of that type with status
    True."""
    status = job.status
    for cond in (status.conditions or []) if status else []:
        if cond.type == condition_type and cond.status == "True":
            return True
    return False


class MPIJobClient:
    """Creates, reads, scales, watches and deletes MPIJobs of one API
    version (``v1``, or ``v2beta1`` for the operator of v2/).

    Its calls have the names of Kubeflow's TrainingClient (create_job,
    get_job, list_jobs, delete_job, get_job_conditions, is_job_*,
    wait_for_job_conditions, get_job_pods, get_job_logs), and the SDK's
    earlier short names (create, get, list, delete, is_running,
    is_succeeded, is_failed, wait_for, get_logs, scale) are the same calls.

    Args:
        namespace: the namespace of calls that name none; by default the
            kubeconfig context's namespace, else ``default``.
        api_client: a configured kubernetes ApiClient; by default one from
            ``config_file`` (or $KUBECONFIG, ~/.kube/config), else the
            in-cluster configuration.
        version: ``v1`` or ``v2beta1``.
        config_file, context: which kubeconfig and context to load when no
            api_client is given.

    Another version is a ValueError.
    """

    def __init__(
        self,
        namespace: Optional[str] = None,
        api_client: Optional[k8s.ApiClient] = None,
        version: str = "v1",
        config_file: Optional[str] = None,
        context: Optional[str] = None,
    ):
        if version not in _VERSIONS:
            raise ValueError("version must be one of %s, not %r" % (", ".join(_VERSIONS), version))
        self.version = version
        self._v = _VERSIONS[version]
        self.models = self._v["models"]
        self.job_class = self._v["job"]
        if api_client is None:
            api_client, default_ns = _load_config(config_file, context)
            namespace = namespace or default_ns
        self.api_client = api_client
        self.namespace = namespace or "default"
        self.custom = k8s.CustomObjectsApi(api_client)
        self.core = k8s.CoreV1Api(api_client)

    # ------------------------------------------------------------------
    # Create, read, change, delete (Kubeflow's names; the short names
    # below them are the same calls)

    def create_job(self, job: JobLike, namespace: Optional[str] = None, *, job_kind: Optional[str] = None):
        """Creates a job from a model, a dict, or the path of a YAML file
        holding one MPIJob; returns the job as the API server stored it.

        The namespace is ``namespace``, else the job's own
        ``metadata.namespace``, else the client's. ``job_kind``, as
        Kubeflow's TrainingClient takes it, may only be "MPIJob". A job of
        another apiVersion than the client's is a ValueError; a job the API
        server refuses raises its answer (ConflictError when the name is
        taken, InvalidError for a job that breaks the CRD's rules)."""
        _check_kind(job_kind)
        body = self._body(job)
        ns = namespace or (body.get("metadata") or {}).get("namespace") or self.namespace
        created = _api_call(self.custom.create_namespaced_custom_object, GROUP, self.version, ns, PLURAL, body)
        return self.job_class.from_dict(created)

    def get_job(self, name: str, namespace: Optional[str] = None, *, job_kind: Optional[str] = None):
        """The job of that name; NotFoundError when there is none."""
        _check_kind(job_kind)
        return self.job_class.from_dict(self._get_raw(name, namespace))

    def list_jobs(
        self,
        namespace: Optional[str] = None,
        label_selector: Optional[str] = None,
        all_namespaces: bool = False,
        *,
        job_kind: Optional[str] = None,
    ):
        """The jobs of a namespace (or of all), optionally those whose labels
        match a selector such as ``team=vision,tier!=dev``."""
        _check_kind(job_kind)
        kwargs = {"label_selector": label_selector} if label_selector else {}
        if all_namespaces:
            result = _api_call(self.custom.list_cluster_custom_object, GROUP, self.version, PLURAL, **kwargs)
        else:
            result = _api_call(
                self.custom.list_namespaced_custom_object, GROUP, self.version, namespace or self.namespace, PLURAL, **kwargs
            )
        return [self.job_class.from_dict(item) for item in result.get("items", [])]

    def patch(self, name: str, patch: Union[Dict[str, Any], models.Model], namespace: Optional[str] = None):
        """Applies a JSON merge patch (a dict, or a model whose set
        attributes are the patch) and returns the job."""
        body = patch.to_dict() if isinstance(patch, models.Model) else patch
        result = _api_call(
            self.custom.patch_namespaced_custom_object, GROUP, self.version, namespace or self.namespace, PLURAL, name, body
        )
        return self.job_class.from_dict(result)

    def delete_job(
        self,
        name: str,
        namespace: Optional[str] = None,
        propagation_policy: str = "Foreground",
        delete_options: Optional[k8s.V1DeleteOptions] = None,
        *,
        job_kind: Optional[str] = None,
    ) -> None:
        """Deletes the job and returns once the API server accepted the
        deletion (the job may still exist for a moment: with the default
        Foreground propagation its pods and other children go before the
        job itself). ``delete_options``, when given, is sent instead of
        the propagation policy. NotFoundError when there is no such job."""
        _check_kind(job_kind)
        _api_call(
            self.custom.delete_namespaced_custom_object,
            GROUP,
            self.version,
            namespace or self.namespace,
            PLURAL,
            name,
            body=delete_options or k8s.V1DeleteOptions(propagation_policy=propagation_policy),
        )

    def create(self, job: JobLike, namespace: Optional[str] = None):
        """create_job."""
        return self.create_job(job, namespace)

    def get(self, name: str, namespace: Optional[str] = None):
        """get_job."""
        return self.get_job(name, namespace)

    def list(self, namespace: Optional[str] = None, label_selector: Optional[str] = None, all_namespaces: bool = False):
        """list_jobs."""
        return self.list_jobs(namespace, label_selector, all_namespaces)

    def delete(self, name: str, namespace: Optional[str] = None, propagation_policy: str = "Foreground") -> None:
        """delete_job."""
        self.delete_job(name, namespace, propagation_policy)

    # ------------------------------------------------------------------
    # Scale

    def scale_job(
        self,
        name: str,
        replicas: int,
        namespace: Optional[str] = None,
        wait: bool = True,
        timeout: float = 600,
        polling_interval: float = 1.0,
    ):
        """Sets the job's worker replicas through the scale subresource (as
        ``kubectl scale`` does), waits until the job has exactly that many
        workers at work, and returns the job as last read.

        The bounds of the job's elasticPolicy are checked first and refused
        with the admission rule's own message (InvalidError), before any
        change. The wait, by reading the job, its worker pods and its
        discover_hosts.sh every ``polling_interval`` seconds, ends once the
        job's status counts ``replicas`` active workers, exactly that many
        worker pods are Running and not being deleted, and discover_hosts.sh
        lists exactly those. A scale-in thus waits out the removed workers'
        drain (the job's drainSeconds), until their pods are deleted.

        With ``wait=False`` it returns the job as soon as the change is
        accepted. Raises WaitTimeoutError (a TimeoutError) after
        ``timeout`` seconds, JobFailedError when the job fails meanwhile
        (MPIJobError when it succeeds), NotFoundError when it does not
        exist or is deleted.
        """
        ns = namespace or self.namespace
        job = self.get_job(name, ns)
        check_replicas(job, replicas, self.models.VALIDATION_MESSAGES)
        _api_call(
            self.custom.patch_namespaced_custom_object_scale,
            GROUP,
            self.version,
            ns,
            PLURAL,
            name,
            {"spec": {"replicas": replicas}},
        )
        if not wait:
            return self.get_job(name, ns)
        return self.wait_for_workers(name, replicas, ns, timeout, polling_interval)

    def scale_in_job(
        self,
        name: str,
        pods: Union[str, Iterable[str]],
        namespace: Optional[str] = None,
        wait: bool = True,
        timeout: float = 600,
        polling_interval: float = 1.0,
    ):
        """Removes the named worker pods from the job: lowers its worker
        replicas by their number, after giving them a
        ``controller.kubernetes.io/pod-deletion-cost`` below every other
        worker's, so that the operator, which removes the workers of the
        lowest cost first (after those not Running), chooses them. They
        leave discover_hosts.sh at once and their pods go after the job's
        drainSeconds. Returns the job, as scale_job does.

        Refused before any change (ValueError) when a name is not a worker
        of the job or names a worker already leaving (draining, deleted or
        finished); MPIJobError when another worker is not Running (the
        operator would remove it first), when the job's workers are not
        at its replicas (it is still resizing), or, after the wait, when
        the operator removed other workers than those named; InvalidError
        when the job would go below its minReplicas. No name at all is a
        ValueError too. With ``wait`` as in scale_job.
        """
        ns = namespace or self.namespace
        victims = [pods] if isinstance(pods, str) else list(dict.fromkeys(pods))
        if not victims:
            raise ValueError("name at least one worker pod to remove")
        job = self.get_job(name, ns)
        workers = {p.metadata.name: p for p in self._pods(name, ns, "worker")}
        live = [p for p in workers.values() if _live(p)]
        for victim in victims:
            pod = workers.get(victim)
            if pod is None:
                raise ValueError("pod %s is not a worker of MPIJob %s/%s (its workers: %s)" % (victim, ns, name, ", ".join(sorted(workers)) or "none"))
            if not _live(pod):
                raise ValueError("worker %s of MPIJob %s/%s is already leaving" % (victim, ns, name))
        others = [p for p in live if p.metadata.name not in victims]
        for pod in others:
            if (pod.status.phase if pod.status else None) != "Running":
                raise MPIJobError(
                    "worker %s of MPIJob %s/%s is %s: the operator removes workers that are not Running first, so it would go instead of %s"
                    % (pod.metadata.name, ns, name, pod.status.phase if pod.status else "without status", ", ".join(victims))
                )
        current = _worker_replicas(job)
        if len(live) != current:
            raise MPIJobError(
                "MPIJob %s/%s has %d live workers but asks for %d: it is still resizing; scale in once its workers are at its replicas"
                % (ns, name, len(live), current)
            )
        target = current - len(victims)
        check_replicas(job, target, self.models.VALIDATION_MESSAGES)
        cost = _victim_cost(others)
        for victim in victims:
            _api_call(self.core.patch_namespaced_pod, victim, ns, {"metadata": {"annotations": {DELETION_COST: str(cost)}}})
        job = self.scale_job(name, target, ns, wait=wait, timeout=timeout, polling_interval=polling_interval)
        if wait:
            kept = [p.metadata.name for p in self._pods(name, ns, "worker") if _live(p)]
            stayed = [v for v in victims if v in kept]
            if stayed:
                raise MPIJobError(
                    "MPIJob %s/%s is at %d workers, but the operator kept %s and removed others" % (ns, name, target, ", ".join(stayed))
                )
        return job

    def scale(self, name: str, replicas: int, namespace: Optional[str] = None):
        """scale_job without the wait: returns the job once the change is
        accepted."""
        return self.scale_job(name, replicas, namespace, wait=False)

    def wait_for_workers(
        self, name: str, replicas: int, namespace: Optional[str] = None, timeout: float = 600, polling_interval: float = 1.0
    ):
        """Waits, without changing the job, until it has exactly ``replicas``
        workers at work, as scale_job does after its change (e.g. for the
        first workers of a new job), and returns the job as last read. The
        same errors as scale_job's wait, and MPIJobError when the job
        succeeds meanwhile."""
        ns = namespace or self.namespace
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(name, ns)
            if condition_true(job, "Failed"):
                raise JobFailedError("MPIJob %s/%s failed: %s" % (ns, name, _failed_message(job)), job)
            if condition_true(job, "Succeeded"):
                raise MPIJobError("MPIJob %s/%s succeeded while waiting for %d workers: it has none any more" % (ns, name, replicas))
            counted = _active_workers(job)
            running = sorted(p.metadata.name for p in self._pods(name, ns, "worker") if _at_work(p))
            try:
                hosts = self.get_hosts(name, ns)
            except NotFoundError:  # the job's files are not written yet
                hosts = []
            listed = sorted({h.name.split(".", 1)[0] for h in hosts} - {name + LAUNCHER_SUFFIX})
            if counted == replicas and len(running) == replicas and running == listed:
                return job
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    "MPIJob %s/%s: not at %d workers after %gs: the status counts %d active, Running: %s; discover_hosts.sh lists: %s"
                    % (ns, name, replicas, timeout, counted, ", ".join(running) or "none", ", ".join(listed) or "none"),
                    job,
                )
            time.sleep(max(0.0, min(polling_interval, deadline - time.monotonic())))

    # ------------------------------------------------------------------
    # Conditions (Kubeflow's names; is_running, is_succeeded, is_failed
    # and wait_for are the same calls)

    def get_job_conditions(
        self, name: Optional[str] = None, namespace: Optional[str] = None, job=None, *, job_kind: Optional[str] = None
    ) -> List[Any]:
        """The conditions of the job's status (JobCondition models: type,
        status, reason, message, times), in the order the operator wrote
        them; empty before it wrote any. Reads the job of that name, or
        takes ``job`` as read before."""
        job = self._job_or_get(name, namespace, job, job_kind)
        return list((job.status.conditions or []) if job.status else [])

    def is_job_created(self, name: Optional[str] = None, namespace: Optional[str] = None, job=None, *, job_kind: Optional[str] = None) -> bool:
        """Whether the job's Created condition is True: the operator has
        taken the job on."""
        return condition_true(self._job_or_get(name, namespace, job, job_kind), "Created")

    def is_job_running(self, name: Optional[str] = None, namespace: Optional[str] = None, job=None, *, job_kind: Optional[str] = None) -> bool:
        """Whether the job's Running condition is True."""
        return condition_true(self._job_or_get(name, namespace, job, job_kind), "Running")

    def is_job_restarting(
        self, name: Optional[str] = None, namespace: Optional[str] = None, job=None, *, job_kind: Optional[str] = None
    ) -> bool:
        """Whether the job's Restarting condition is True (its launcher is
        being replaced, e.g. after an eviction)."""
        return condition_true(self._job_or_get(name, namespace, job, job_kind), "Restarting")

    def is_job_succeeded(
        self, name: Optional[str] = None, namespace: Optional[str] = None, job=None, *, job_kind: Optional[str] = None
    ) -> bool:
        """Whether the job's Succeeded condition is True."""
        return condition_true(self._job_or_get(name, namespace, job, job_kind), "Succeeded")

    def is_job_failed(self, name: Optional[str] = None, namespace: Optional[str] = None, job=None, *, job_kind: Optional[str] = None) -> bool:
        """Whether the job's Failed condition is True."""
        return condition_true(self._job_or_get(name, namespace, job, job_kind), "Failed")

    def is_running(self, name: str, namespace: Optional[str] = None) -> bool:
        """is_job_running."""
        return self.is_job_running(name, namespace)

    def is_succeeded(self, name: str, namespace: Optional[str] = None) -> bool:
        """is_job_succeeded."""
        return self.is_job_succeeded(name, namespace)

    def is_failed(self, name: str, namespace: Optional[str] = None) -> bool:
        """is_job_failed."""
        return self.is_job_failed(name, namespace)

    def wait_for_job_conditions(
        self,
        name: str,
        namespace: Optional[str] = None,
        expected_conditions: Union[str, Iterable[str]] = frozenset({"Succeeded"}),
        timeout: float = 600,
        polling_interval: Optional[float] = None,
        callback: Optional[Callable[[Any], None]] = None,
        *,
        until: Optional[Callable[[Any], bool]] = None,
        fail_on_failed: bool = True,
        wait_timeout: Optional[float] = None,
        job_kind: Optional[str] = None,
    ):
        """Waits until one of ``expected_conditions`` is True on the job (or,
        when ``until`` is given, until ``until(job)`` holds instead), and
        returns the job as last read.

        Args:
            expected_conditions: condition types, any of which ends the
                wait: Created, Running, Restarting, Succeeded, Failed,
                Resizing, Blocked, and under v2beta1 Suspended. Others are
                a ValueError. One type may be given as a string.
            timeout: seconds to wait in all. ``wait_timeout`` is Kubeflow's
                name for it and wins when given. (Kubeflow's ``timeout`` is
                the time of one request; here it is the whole wait.)
            polling_interval: None (the default) waits on a watch of the
                job and looks at every change as it happens; a number of
                seconds (more than 0, else ValueError) reads the job that
                often instead, as Kubeflow's client does (for an account
                that may get MPIJobs but not watch them).
            callback: called with the job each time it is read or changes.
            until: a predicate of the job that replaces the conditions.
            fail_on_failed: when True (the default) a job whose Failed
                condition turns True ends the wait with JobFailedError,
                unless "Failed" is expected.

        Raises:
            WaitTimeoutError (a TimeoutError) after ``timeout`` seconds,
            carrying the last state of the job; JobFailedError (a
            RuntimeError) when the job fails first; NotFoundError when the
            job does not exist or is deleted meanwhile.
        """
        _check_kind(job_kind)
        ns = namespace or self.namespace
        wanted = {expected_conditions} if isinstance(expected_conditions, str) else set(expected_conditions)
        unknown = wanted - set(self._v["conditions"])
        if unknown:
            raise ValueError(
                "%s MPIJobs have no condition %s; they have %s" % (self.version, ", ".join(sorted(unknown)), ", ".join(self._v["conditions"]))
            )
        if wait_timeout is not None:
            timeout = wait_timeout
        deadline = time.monotonic() + timeout

        def done(job) -> bool:
            if callback is not None:
                callback(job)
            if until is not None:
                if until(job):
                    return True
            elif any(condition_true(job, c) for c in wanted):
                return True
            if fail_on_failed and "Failed" not in wanted and condition_true(job, "Failed"):
                raise JobFailedError("MPIJob %s/%s failed: %s" % (ns, name, _failed_message(job)), job)
            return False

        def timed_out(job):
            what = "none of %s" % sorted(wanted) if until is None else "the wait's predicate does not hold"
            return WaitTimeoutError("MPIJob %s/%s: %s after %gs" % (ns, name, what, timeout), job)

        if polling_interval is not None:
            if polling_interval <= 0:
                raise ValueError("polling_interval must be more than 0 seconds, or None to watch")
            while True:
                job = self.get_job(name, ns)
                if done(job):
                    return job
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise timed_out(job)
                time.sleep(min(polling_interval, remaining))

        raw = self._get_raw(name, ns)
        job = self.job_class.from_dict(raw)
        resource_version = raw["metadata"]["resourceVersion"]
        finished = done(job)
        while not finished:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise timed_out(job)
            watcher = k8s_watch.Watch()
            try:
                for event in watcher.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    self.version,
                    ns,
                    PLURAL,
                    field_selector="metadata.name=" + name,
                    resource_version=resource_version,
                    timeout_seconds=max(1, int(remaining + 0.999)),
                    _request_timeout=remaining + 10,
                ):
                    obj = event["object"]
                    if event["type"] == "DELETED":
                        raise NotFoundError("MPIJob %s/%s was deleted while waiting" % (ns, name), status=404, reason="NotFound")
                    resource_version = obj["metadata"]["resourceVersion"]
                    job = self.job_class.from_dict(obj)
                    finished = done(job)
                    if finished or time.monotonic() >= deadline:
                        break
            except ApiException as exc:
                if exc.status != 410:
                    raise APIError.from_api_exception(exc) from None
                # The watch's resourceVersion is too old: read afresh.
                raw = self._get_raw(name, ns)
                job = self.job_class.from_dict(raw)
                resource_version = raw["metadata"]["resourceVersion"]
                finished = done(job)
            finally:
                watcher.stop()
        return job

    def wait_for(
        self,
        name: str,
        conditions: Union[str, Iterable[str]] = ("Succeeded",),
        timeout: float = 600,
        namespace: Optional[str] = None,
        until: Optional[Callable[[Any], bool]] = None,
        fail_on_failed: bool = True,
    ):
        """wait_for_job_conditions on a watch, with the conditions second."""
        return self.wait_for_job_conditions(
            name, namespace, expected_conditions=conditions, timeout=timeout, until=until, fail_on_failed=fail_on_failed
        )

    # ------------------------------------------------------------------
    # Hosts, workers, logs, events

    def get_hosts(self, name: str, namespace: Optional[str] = None) -> List[Host]:
        """The hosts that the job's discover_hosts.sh lists now (the hosts
        Horovod trains on), in the script's order. NotFoundError when the
        job's ConfigMap ``<job>-config`` does not exist (no such job, or
        the operator has not written it yet)."""
        cm = _api_call(self.core.read_namespaced_config_map, name + "-config", namespace or self.namespace)
        return parse_discover_hosts((cm.data or {}).get("discover_hosts.sh", ""))

    def get_workers(self, name: str, namespace: Optional[str] = None) -> List[Worker]:
        """The job's worker pods by index: phase, node, whether
        discover_hosts.sh lists them, and since when they drain.
        NotFoundError as get_hosts."""
        ns = namespace or self.namespace
        listed = {h.name.split(".", 1)[0] for h in self.get_hosts(name, ns)}
        pods = self._pods(name, ns, "worker")
        workers = [
            Worker(
                name=pod.metadata.name,
                index=self._index(pod),
                phase=pod.status.phase if pod.status else None,
                node=pod.spec.node_name if pod.spec else None,
                listed=pod.metadata.name in listed,
                draining_since=parse_time((pod.metadata.annotations or {}).get(DRAINING_SINCE)),
            )
            for pod in pods
        ]
        return sorted(workers, key=lambda w: (w.index is None, w.index if w.index is not None else 0, w.name))

    def get_job_pods(
        self,
        name: str,
        namespace: Optional[str] = None,
        role: Optional[str] = None,
        replica_index: Optional[int] = None,
        *,
        replica_type: Optional[str] = None,
        is_master: bool = False,
        job_kind: Optional[str] = None,
    ) -> List[k8s.V1Pod]:
        """The job's pods (the kubernetes client's V1Pod): its launcher
        pods, newest first, then its workers by index; whatever their
        phase, draining and terminating ones included.

        Args:
            role: "launcher" or "worker" for only those; ``replica_type``
                is Kubeflow's name for it (either case, e.g. "Worker"), and
                ``is_master=True`` means the launcher.
            replica_index: only the worker of that index.

        Under v1 the launcher is the pod ``<job>-launcher``; under v2beta1
        the launcher pods are those of the launcher Job ``<job>-launcher``
        (a retried launcher leaves its failed pods there). NotFoundError
        when the job does not exist; an empty list for a job without such
        pods (not started, suspended, or finished and cleaned up).
        """
        _check_kind(job_kind)
        ns = namespace or self.namespace
        role = _pod_role(role, replica_type, is_master, replica_index)
        pods = self._pods(name, ns, role)
        def of(wanted: str) -> List[k8s.V1Pod]:
            if role not in (None, wanted):
                return []
            return [p for p in pods if (p.metadata.labels or {}).get(self._v["role_label"]) == wanted]

        launchers = _newest_first([p for p in of("launcher") if self._is_launcher(name, p)])
        workers = [p for p in of("worker") if replica_index is None or self._index(p) == replica_index]
        workers.sort(key=lambda p: (self._index(p) is None, self._index(p) or 0, p.metadata.name))
        if not launchers and not workers:
            self._get_raw(name, ns)  # NotFoundError for a job that does not exist
        return launchers + workers

    def get_job_pod_names(
        self,
        name: str,
        namespace: Optional[str] = None,
        role: Optional[str] = None,
        replica_index: Optional[int] = None,
        *,
        replica_type: Optional[str] = None,
        is_master: bool = False,
        job_kind: Optional[str] = None,
    ) -> List[str]:
        """The names of get_job_pods' pods, in its order."""
        pods = self.get_job_pods(name, namespace, role, replica_index, replica_type=replica_type, is_master=is_master, job_kind=job_kind)
        return [p.metadata.name for p in pods]

    def get_job_logs(
        self,
        name: str,
        namespace: Optional[str] = None,
        container: Optional[str] = None,
        role: Optional[str] = None,
        replica_index: Optional[int] = None,
        pod_name: Optional[str] = None,
        follow: bool = False,
        tail_lines: Optional[int] = None,
        *,
        replica_type: Optional[str] = None,
        is_master: bool = False,
        job_kind: Optional[str] = None,
    ) -> Dict[str, Any]:
        """The logs of the job's pods: a dict from pod name to the pod's log
        as a string, in get_job_pods' order (launcher pods newest first,
        then workers by index).

        By default every pod of the job; ``role``, ``replica_type``,
        ``is_master`` and ``replica_index`` choose as in get_job_pods, and
        ``pod_name`` reads that one pod (not checked against the job's
        pods). ``container`` is read in every pod chosen; without it, the
        API server's default container of each pod (its only one, or the
        one its ``kubectl.kubernetes.io/default-container`` annotation
        names), else its first. ``tail_lines`` keeps the last lines of each.

        With ``follow`` the values are iterators of lines instead, each
        stream opened by this call and ending when its container does (read
        several in threads of their own).

        An empty dict for a job without such pods; NotFoundError when the
        job (or the named pod) does not exist; a log the API server cannot
        give (e.g. a pod whose container has not started, or a wrong
        container) raises its answer (APIError), for the whole call.
        """
        _check_kind(job_kind)
        ns = namespace or self.namespace
        if pod_name is not None:
            if role is not None or replica_type is not None or is_master or replica_index is not None:
                raise ValueError("give pod_name or a role and index, not both")
            targets = [(pod_name, container)]
        else:
            pods = self.get_job_pods(name, ns, role, replica_index, replica_type=replica_type, is_master=is_master)
            targets = [(p.metadata.name, container or _main_container(p)) for p in pods]
        kwargs: Dict[str, Any] = {}
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        logs: Dict[str, Any] = {}
        opened = []
        try:
            for pod, chosen in targets:
                args = dict(kwargs, container=chosen) if chosen else kwargs
                if not follow:
                    logs[pod] = _api_call(self.core.read_namespaced_pod_log, pod, ns, **args)
                    continue
                resp = _api_call(self.core.read_namespaced_pod_log, pod, ns, follow=True, _preload_content=False, **args)
                opened.append(resp)
                logs[pod] = _lines(resp)
        except BaseException:
            for resp in opened:
                resp.release_conn()
            raise
        return logs

    def get_logs(
        self,
        name: str,
        worker: Optional[Union[int, str]] = None,
        namespace: Optional[str] = None,
        container: Optional[str] = None,
        follow: bool = False,
        tail_lines: Optional[int] = None,
    ) -> Union[str, Iterator[str]]:
        """get_job_logs of one pod: the launcher's, or a worker's (its index
        or pod name), as a string, or with ``follow`` an iterator of lines
        that ends when the container does. Without ``container``, the API
        server's default container.

        The launcher is the pod ``<job>-launcher`` under v1; under v2beta1
        the newest pod of the launcher Job ``<job>-launcher``. NotFoundError
        when the job has no launcher pod (yet), or the worker's pod does not
        exist."""
        ns = namespace or self.namespace
        pod = self._launcher_pod_name(name, ns) if worker is None else _worker_pod_name(name, worker)
        return self.get_job_logs(name, ns, container=container, pod_name=pod, follow=follow, tail_lines=tail_lines)[pod]

    def get_events(self, name: str, namespace: Optional[str] = None) -> List[k8s.CoreV1Event]:
        """The events about the job (not its pods), oldest first."""
        ns = namespace or self.namespace
        selector = "involvedObject.kind=MPIJob,involvedObject.name=" + name
        events = _api_call(self.core.list_namespaced_event, ns, field_selector=selector).items
        return sorted(events, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp or _EPOCH)

    # ------------------------------------------------------------------

    def _job_or_get(self, name: Optional[str], namespace: Optional[str], job, job_kind: Optional[str]):
        _check_kind(job_kind)
        if job is not None:
            return job
        if not name:
            raise ValueError("give the job's name or the job")
        return self.get_job(name, namespace)

    def _get_raw(self, name: str, namespace: Optional[str]) -> Dict[str, Any]:
        return _api_call(self.custom.get_namespaced_custom_object, GROUP, self.version, namespace or self.namespace, PLURAL, name)

    def _body(self, job: JobLike) -> Dict[str, Any]:
        if isinstance(job, models.Model):
            body = job.to_dict()
        elif isinstance(job, dict):
            body = dict(job)
        elif isinstance(job, (str, os.PathLike)):
            body = load_job_file(job)
        else:
            raise TypeError("a job is a model, a dict or a YAML file's path, not %s" % type(job).__name__)
        body.setdefault("apiVersion", GROUP + "/" + self.version)
        body.setdefault("kind", "MPIJob")
        if body["apiVersion"] != GROUP + "/" + self.version or body["kind"] != "MPIJob":
            raise ValueError("this client creates %s/%s MPIJobs, not %s %s" % (GROUP, self.version, body["apiVersion"], body["kind"]))
        return body

    def _pods(self, name: str, ns: str, role: Optional[str]) -> List[k8s.V1Pod]:
        """The pods the operator labels as the job's, of one role or all."""
        selector = "%s=%s" % (self._v["job_label"], name)
        if role is not None:
            selector += ",%s=%s" % (self._v["role_label"], role)
        return _api_call(self.core.list_namespaced_pod, ns, label_selector=selector).items

    def _is_launcher(self, name: str, pod: k8s.V1Pod) -> bool:
        """Whether a pod that the operator labels as the job's launcher is
        one: under v2beta1, a pod that the launcher Job controls."""
        if not self._v["launcher_job"]:
            return True
        return any(
            ref.controller and ref.kind == "Job" and ref.name == name + LAUNCHER_SUFFIX and ref.api_version.startswith("batch/")
            for ref in pod.metadata.owner_references or []
        )

    def _launcher_pods(self, name: str, ns: str) -> List[k8s.V1Pod]:
        """The job's launcher pods, newest first."""
        return _newest_first([p for p in self._pods(name, ns, "launcher") if self._is_launcher(name, p)])

    def _launcher_pod_name(self, name: str, ns: str) -> str:
        """The name of the pod that runs the job's launcher now: v1's is
        named after the job; v2beta1's is the newest pod of its Job."""
        if not self._v["launcher_job"]:
            return name + LAUNCHER_SUFFIX
        pods = self._launcher_pods(name, ns)
        if not pods:
            self._get_raw(name, ns)  # NotFoundError for a job that does not exist
            raise NotFoundError("MPIJob %s/%s has no launcher pod" % (ns, name), status=404, reason="NotFound")
        return pods[0].metadata.name

    def _index(self, pod: k8s.V1Pod) -> Optional[int]:
        labels = pod.metadata.labels or {}
        for key in self._v["index_labels"]:
            if labels.get(key, "").isdigit():
                return int(labels[key])
        suffix = pod.metadata.name.rsplit("-", 1)[-1]
        return int(suffix) if suffix.isdigit() else None


def _live(pod: k8s.V1Pod) -> bool:
    """Whether the job counts a worker towards its replicas: neither
    draining, nor being deleted, nor finished."""
    phase = pod.status.phase if pod.status else None
    return DRAINING_SINCE not in (pod.metadata.annotations or {}) and pod.metadata.deletion_timestamp is None and phase not in ("Succeeded", "Failed")


def _at_work(pod: k8s.V1Pod) -> bool:
    """Whether a worker counts as active in the job's status: Running and
    not being deleted (draining ones included, until their pods go)."""
    return (pod.status.phase if pod.status else None) == "Running" and pod.metadata.deletion_timestamp is None


def _active_workers(job) -> int:
    """The active workers that the job's status counts."""
    statuses = (job.status.replica_statuses if job.status else None) or {}
    worker = statuses.get("Worker")
    return (worker.active if worker is not None else None) or 0


def _worker_replicas(job) -> int:
    """The worker replicas the job asks for (unset means 1, as the CRD
    defaults it)."""
    worker = job.spec.mpi_replica_specs.worker if job.spec and job.spec.mpi_replica_specs else None
    if worker is None:
        return 0
    return 1 if worker.replicas is None else worker.replicas


def _victim_cost(others: List[k8s.V1Pod]) -> int:
    """A pod-deletion-cost below every other worker's and below the
    default 0. The operator reads a cost as a 32-bit integer, and any
    other value as 0."""
    lowest = 0
    for pod in others:
        value = (pod.metadata.annotations or {}).get(DELETION_COST)
        if value is not None and re.fullmatch(r"[+-]?[0-9]+", value) and -(2**31) <= int(value) < 2**31:
            lowest = min(lowest, int(value))
    if lowest == -(2**31):
        raise MPIJobError("another worker already has the lowest pod-deletion-cost (%d)" % lowest)
    return lowest - 1


def _check_kind(job_kind: Optional[str]) -> None:
    """Refuses a Kubeflow job_kind other than MPIJob."""
    if job_kind is not None and job_kind != "MPIJob":
        raise ValueError("MPIJobClient serves MPIJobs, not %s" % job_kind)


def _pod_role(role: Optional[str], replica_type: Optional[str], is_master: bool, replica_index: Optional[int]) -> Optional[str]:
    """The role of the pods that get_job_pods is asked for: "launcher",
    "worker", or None for all."""
    roles = set()
    for given in (role, replica_type):
        if given is None:
            continue
        if given.lower() not in ("launcher", "worker"):
            raise ValueError("an MPIJob's pods are its launcher and its workers, not %r" % given)
        roles.add(given.lower())
    if is_master:
        roles.add("launcher")
    if replica_index is not None and not roles:
        roles.add("worker")
    if len(roles) > 1:
        raise ValueError("role, replica_type and is_master ask for different pods")
    chosen = roles.pop() if roles else None
    if replica_index is not None and chosen != "worker":
        raise ValueError("replica_index picks a worker; the launcher has none")
    return chosen


def _newest_first(pods: List[k8s.V1Pod]) -> List[k8s.V1Pod]:
    return sorted(pods, key=lambda p: (p.metadata.creation_timestamp or _EPOCH, p.metadata.name), reverse=True)


def _main_container(pod: k8s.V1Pod) -> Optional[str]:
    """The container whose log to read when none is named: None, for the
    API server's default, when the pod has one container or names its
    default; else the first, the one the operator treats as the main."""
    containers = (pod.spec.containers if pod.spec else None) or []
    if len(containers) <= 1 or (pod.metadata.annotations or {}).get("kubectl.kubernetes.io/default-container"):
        return None
    return containers[0].name


def _worker_pod_name(name: str, worker: Union[int, str]) -> str:
    """The pod of a worker given by index or by pod name."""
    if isinstance(worker, str) and not worker.isdigit():
        return worker
    return "%s-worker-%d" % (name, int(worker))


def check_replicas(job, replicas: int, rules) -> None:
    """Refuses, with the CRD's admission message (InvalidError), a worker
    count that the API server would refuse for this job: below 0, or
    outside its elasticPolicy's bounds. A count that is not an int is a
    TypeError."""
    field = "spec.mpiReplicaSpecs.Worker.replicas"
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise TypeError("replicas must be an int, not %s" % type(replicas).__name__)
    policy = job.spec.elastic_policy
    if replicas < 0:
        raise InvalidError(admission_message(rules, field, "0 or more"), status=422, reason="Invalid")
    if policy is None:
        return
    if replicas < (policy.min_replicas or 1):
        raise InvalidError(admission_message(rules, field, "less than"), status=422, reason="Invalid")
    if policy.max_replicas is not None and replicas > policy.max_replicas:
        raise InvalidError(admission_message(rules, field, "more than"), status=422, reason="Invalid")


def admission_message(rules, field: str, words: str) -> str:
    """The CRD's message about a field that contains the words, prefixed
    with the field as the API server prints it."""
    for path, message in rules:
        if words not in message:
            continue
        if path == field:
            return "%s: Invalid value: %s" % (field, message)
        if message.startswith(field + " "):
            return "%s: Invalid value: %s" % (field, message[len(field) + 1 :])
    raise LookupError("the CRD has no admission rule on %s about %r" % (field, words))


def _failed_message(job) -> str:
    for cond in (job.status.conditions or []) if job.status else []:
        if cond.type == "Failed" and cond.status == "True":
            return "%s: %s" % (cond.reason, cond.message)
    return "Failed"


def _lines(resp) -> Iterator[str]:
    try:
        pending = b""
        for chunk in resp.stream(4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")
    finally:
        resp.release_conn()


def load_job_file(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The one MPIJob that a YAML file holds; ValueError when it holds
    none or several."""
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    jobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "MPIJob"]
    if len(jobs) != 1:
        raise ValueError("%s holds %d MPIJobs; create takes a file with exactly one" % (path, len(jobs)))
    return jobs[0]


def _load_config(config_file: Optional[str], context: Optional[str]):
    """An ApiClient from a kubeconfig, else the in-cluster configuration,
    and the namespace it names."""
    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=config_file)
    except (k8s_config.ConfigException, FileNotFoundError, TypeError):
        contexts, active = None, None
    if contexts is not None:
        api_client = k8s_config.new_client_from_config(config_file=config_file, context=context)
        chosen = next((c for c in contexts if c["name"] == context), active) if context else active
        return api_client, (chosen or {}).get("context", {}).get("namespace")
    k8s_config.load_incluster_config()
    ns_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    namespace = None
    if os.path.exists(ns_file):
        with open(ns_file, encoding="utf-8") as f:
            namespace = f.read().strip()
    return k8s.ApiClient(), namespace


__all__ = ["MPIJobClient", "admission_message", "check_replicas", "condition_true", "load_job_file"]
