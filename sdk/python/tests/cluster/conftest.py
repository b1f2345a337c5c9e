"""Fixtures of the tests against a real control plane with the v1
operator running: `make test-sdk` (sdk/python/run-tests.sh) starts both and
sets MPIJOB_TEST_KUBECONFIG."""

import os
import time
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from mpijob import MPIJobClient


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


@pytest.fixture(name="client")
def client_fixture(kubeconfig, namespace):
    return MPIJobClient(namespace=namespace, config_file=kubeconfig)
