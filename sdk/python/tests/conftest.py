"""Fixtures of the tests against a real control plane with an operator
running (tests/cluster: v1, tests/cluster_v2: v2beta1): `make test-sdk`
(sdk/python/run-tests.sh) starts both and sets MPIJOB_TEST_KUBECONFIG. The
unit tests use none of them."""

import os
import time
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from mpijob import MPIJobClient, NotFoundError


def eventually(check, timeout=60, interval=0.2):
    """Calls check until it returns something truthy (returned) or
    timeout seconds have passed (AssertionError naming the last value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("not true after %ss: last value %r" % (timeout, value))
        time.sleep(interval)


def active_workers(n):
    """A wait_for predicate: the job's status counts n Running workers."""

    def check(job):
        worker = (job.status.replica_statuses or {}).get("Worker") if job.status else None
        return worker is not None and worker.active == n

    return check


def gone(client, name):
    """Whether the job no longer exists."""
    try:
        client.get(name)
    except NotFoundError:
        return True
    return False


def cri_log(path, *lines):
    """Appends lines to path as a container runtime writes a container's
    log, in the CRI format that kwok serves like a kubelet: "<RFC 3339 time
    with nine fractional digits> stdout F <line>" each."""
    now = time.time_ns()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now // 10**9)) + ".%09dZ" % (now % 10**9)
    with open(path, "a", encoding="utf-8") as f:
        f.writelines("%s stdout F %s\n" % (stamp, line) for line in lines)


def serve_log(custom, namespace, pod, container, path):
    """A kwok Logs object: kwok answers the API server's request for the
    log of pod's container with the file at path."""
    body = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": [{"containers": [container], "logsFile": str(path)}]},
    }
    custom.create_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "logs", body)


def end_pod(core, namespace, name, phase):
    """Ends a pod as its container's exit would (kwok runs none): phase and
    container state through the status subresource."""

    def read():
        try:
            return core.read_namespaced_pod(name, namespace)
        except k8s.ApiException:
            return None

    pod = eventually(read)
    container = pod.spec.containers[0]
    code = 0 if phase == "Succeeded" else 1
    core.patch_namespaced_pod_status(
        name,
        namespace,
        {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": container.name,
                        "image": container.image,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}},
                    }
                ],
            }
        },
    )


@pytest.fixture(name="custom", scope="session")
def custom_fixture(kubeconfig):
    return k8s.CustomObjectsApi(k8s_config.new_client_from_config(config_file=kubeconfig))


@pytest.fixture(name="kubeconfig", scope="session")
def kubeconfig_fixture():
    path = os.environ.get("MPIJOB_TEST_KUBECONFIG")
    if not path:
        pytest.fail("MPIJOB_TEST_KUBECONFIG is not set: run these tests with `make test-sdk`, which starts a control plane and the operator")
    return path


@pytest.fixture(name="core", scope="session")
def core_fixture(kubeconfig):
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))


@pytest.fixture(name="namespace")
def namespace_fixture(core):
    """A namespace of the test's own, with its default ServiceAccount (pods
    are refused before it exists); deleted at the end."""
    name = "sdk-" + uuid.uuid4().hex[:6]
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    eventually(lambda: core.list_namespaced_service_account(name, field_selector="metadata.name=default").items)
    yield name
    core.delete_namespace(name)


@pytest.fixture(name="version")
def version_fixture():
    """The API version of the client; tests/cluster_v2 overrides it."""
    return "v1"


@pytest.fixture(name="client")
def client_fixture(kubeconfig, namespace, version):
    return MPIJobClient(namespace=namespace, config_file=kubeconfig, version=version)
