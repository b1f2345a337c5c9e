"""MPIJobClient(version="v2beta1") against a real control plane with the
v2 operator (_output/bin/mpi-operator-v2) running: elastic jobs whose
discover_hosts.sh lists host names in the job's DNS subdomain, without
slots."""

import pytest
from kubernetes import client as k8s

from mpijob import APIError, InvalidError, NotFoundError, elastic_horovod_job
from mpijob.models import V2beta1MPIJob

from conftest import active_workers, cri_log, end_pod, eventually, gone, serve_log  # pylint: disable=import-error


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


def test_v2beta1_launcher_logs_pods_waits_and_scale(client, core, custom, namespace, tmp_path):
    """The v2 launcher is a batch Job <job>-launcher whose pod the Job
    controller names <job>-launcher-<suffix>: get_logs, get_job_logs and
    get_job_pods find that pod through the Job. kwok runs no container, but
    it serves a pod's log from the file that a kwok Logs object named after
    the pod gives, and an empty log (ClusterLogs "default") to a pod without
    one; so the launcher's log is first '' (not NotFoundError, as reading a
    pod named <job>-launcher gave), then the file's lines."""
    client.create_job(elastic_horovod_job("v2kf", "img", ["t"], 2, 1, 3, drain_seconds=2, version="v2beta1"))
    client.wait_for_job_conditions("v2kf", expected_conditions={"Running"}, timeout=90)
    client.wait_for_workers("v2kf", 2, timeout=60, polling_interval=0.2)
    assert client.is_job_created("v2kf") and client.is_job_running("v2kf") and not client.is_job_succeeded("v2kf")

    launchers = eventually(lambda: client.get_job_pods("v2kf", role="launcher"))
    assert len(launchers) == 1
    launcher = launchers[0]
    assert launcher.metadata.name.startswith("v2kf-launcher-") and launcher.metadata.name != "v2kf-launcher"
    owner = [(r.kind, r.name) for r in launcher.metadata.owner_references if r.controller]
    assert owner == [("Job", "v2kf-launcher")]
    assert launcher.metadata.labels["batch.kubernetes.io/job-name"] == "v2kf-launcher"
    pod = launcher.metadata.name
    assert client.get_job_pod_names("v2kf") == [pod, "v2kf-worker-0", "v2kf-worker-1"]
    assert client.get_job_pod_names("v2kf", replica_type="Worker", replica_index=1) == ["v2kf-worker-1"]

    assert client.get_logs("v2kf") == ""
    assert client.get_job_logs("v2kf") == {pod: "", "v2kf-worker-0": "", "v2kf-worker-1": ""}

    path = tmp_path / "launcher.log"
    cri_log(path, "mpirun: 2 hosts", "rank 0: epoch 1")
    serve_log(custom, namespace, pod, "mpi-launcher", path)
    assert eventually(lambda: client.get_logs("v2kf")) == "mpirun: 2 hosts\nrank 0: epoch 1\n"
    assert client.get_logs("v2kf", tail_lines=1, container="mpi-launcher") == "rank 0: epoch 1\n"
    logs = client.get_job_logs("v2kf")
    assert list(logs.items()) == [(pod, "mpirun: 2 hosts\nrank 0: epoch 1\n"), ("v2kf-worker-0", ""), ("v2kf-worker-1", "")]
    assert client.get_job_logs("v2kf", is_master=True) == {pod: "mpirun: 2 hosts\nrank 0: epoch 1\n"}

    job = client.scale_job("v2kf", 3, timeout=60, polling_interval=0.2)
    assert job.status.replica_statuses["Worker"].active == 3
    assert listed_workers(client, "v2kf") == ["v2kf-worker-%d" % i for i in range(3)]
    job = client.scale_in_job("v2kf", "v2kf-worker-0", timeout=60, polling_interval=0.2)
    assert job.spec.mpi_replica_specs.worker.replicas == 2
    assert listed_workers(client, "v2kf") == ["v2kf-worker-1", "v2kf-worker-2"]
    hosts = client.get_hosts("v2kf")
    assert [h.name.split(".")[0] for h in hosts] == ["v2kf-worker-1", "v2kf-worker-2"]

    with pytest.raises(TimeoutError):
        client.wait_for_job_conditions("v2kf", expected_conditions={"Succeeded"}, timeout=2, polling_interval=0.5)
    end_pod(core, namespace, pod, "Succeeded")
    done = client.wait_for_job_conditions("v2kf", expected_conditions={"Succeeded", "Failed"}, timeout=60)
    assert client.is_job_succeeded(job=done), [(c.type, c.status, c.reason) for c in done.status.conditions]

    client.delete_job("v2kf")
    eventually(lambda: gone(client, "v2kf"))
    with pytest.raises(NotFoundError):
        client.wait_for_job_conditions("v2kf", timeout=5)
