"""MPIJobClient(version="v2beta1") against a real control plane with the
v2 operator (_output/bin/mpi-operator-v2) running: elastic jobs whose
discover_hosts.sh lists host names in the job's DNS subdomain, without
slots."""

import pytest
from kubernetes import client as k8s

from mpijob import APIError, InvalidError, elastic_horovod_job
from mpijob.models import V2beta1MPIJob

from conftest import active_workers, eventually, gone  # pylint: disable=import-error


@pytest.fixture(name="version")
def version_fixture():
    return "v2beta1"


def listed_workers(client, name):
    return [w.name for w in client.get_workers(name) if w.listed]


def test_elastic_v2beta1_job(client, namespace):
    job = elastic_horovod_job("v2job", "horovod/horovod:0.28.1", ["python", "train.py"], 2, 1, 3, version="v2beta1")
    created = client.create(job)
    assert isinstance(created, V2beta1MPIJob)
    assert created.spec.mpi_implementation == "OpenMPI"

    client.wait_for("v2job", ["Running"], timeout=90)
    client.wait_for("v2job", until=active_workers(2), timeout=60)
    eventually(lambda: listed_workers(client, "v2job") == ["v2job-worker-0", "v2job-worker-1"])
    hosts = client.get_hosts("v2job")
    assert [h.name.split(".")[0] for h in hosts] == ["v2job-worker-0", "v2job-worker-1"]
    assert all(h.slots is None and h.name.split(".")[1:3] == ["v2job", namespace] for h in hosts)

    assert client.scale("v2job", 3).spec.mpi_replica_specs.worker.replicas == 3
    client.wait_for("v2job", until=active_workers(3), timeout=60)
    eventually(lambda: listed_workers(client, "v2job") == ["v2job-worker-%d" % i for i in range(3)])

    with pytest.raises(InvalidError) as ours:
        client.scale("v2job", 4)
    with pytest.raises(k8s.ApiException) as raw:  # the same change, sent unchecked
        client.custom.patch_namespaced_custom_object_scale(
            "kubeflow.org", "v2beta1", namespace, "mpijobs", "v2job", {"spec": {"replicas": 4}}
        )
    theirs = APIError.from_api_exception(raw.value)
    assert (theirs.status, theirs.reason) == (422, "Invalid")
    assert theirs.message == 'MPIJob.kubeflow.org "v2job" is invalid: ' + str(ours.value)

    client.scale("v2job", 1)
    eventually(lambda: listed_workers(client, "v2job") == ["v2job-worker-0"])
    eventually(lambda: [w.name for w in client.get_workers("v2job") if w.draining_since] == ["v2job-worker-1", "v2job-worker-2"])
    assert "WorkersDraining" in [e.reason for e in client.get_events("v2job")]

    client.delete("v2job")

    eventually(lambda: gone(client, "v2job"))
