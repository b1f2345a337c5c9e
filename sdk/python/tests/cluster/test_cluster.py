"""MPIJobClient against a real kube-apiserver (CRD, CEL admission rules,
scale subresource) with the v1 operator running as a process and kwok
nodes: pods reach Running about half a second after they are created, and
run no container."""

import copy
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml
from kubernetes import client as k8s

from mpijob import (
    APIError,
    ConflictError,
    Host,
    InvalidError,
    JobFailedError,
    NotFoundError,
    WaitTimeoutError,
    elastic_horovod_job,
)
from mpijob.models import V1MPIJob

from conftest import active_workers, eventually, gone  # pylint: disable=import-error

REPO = pathlib.Path(__file__).resolve().parents[4]
PI = REPO / "examples" / "v1" / "pi" / "pi.yaml"


def hosts(name, n):
    return [Host("%s-worker-%d" % (name, i), 1) for i in range(n)]


def test_elastic_job_scale_hosts_workers_events_delete(client, core, namespace):
    job = elastic_horovod_job("elastic", "horovod/horovod:0.28.1", ["python", "train.py"], 2, 1, 4, drain_seconds=30)
    created = client.create(job)
    assert isinstance(created, V1MPIJob) and created.metadata.namespace == namespace

    running = client.wait_for("elastic", ["Running"], timeout=60)
    assert client.is_running("elastic") and not client.is_succeeded("elastic") and not client.is_failed("elastic")
    # (a Resizing condition may be True as well while the workers start)
    true = {c.type: c.reason for c in running.status.conditions if c.status == "True"}
    assert (true.get("Created"), true.get("Running")) == ("MPIJobCreated", "MPIJobRunning")
    assert "Succeeded" not in true and "Failed" not in true
    client.wait_for("elastic", until=active_workers(2), timeout=60)
    eventually(lambda: client.get_hosts("elastic") == hosts("elastic", 2))

    scaled = client.scale("elastic", 4)
    assert scaled.spec.mpi_replica_specs.worker.replicas == 4
    client.wait_for("elastic", until=active_workers(4), timeout=60)
    eventually(lambda: client.get_hosts("elastic") == hosts("elastic", 4))
    workers = client.get_workers("elastic")
    assert [(w.name, w.index, w.phase, w.listed, w.draining_since) for w in workers] == [
        ("elastic-worker-%d" % i, i, "Running", True, None) for i in range(4)
    ]
    assert all(w.node and w.node.startswith("kwok-node-") for w in workers)

    before = time.time()
    client.scale("elastic", 1)
    eventually(lambda: client.get_hosts("elastic") == hosts("elastic", 1))
    eventually(lambda: sum(1 for w in client.get_workers("elastic") if w.draining_since) == 3)
    workers = client.get_workers("elastic")
    assert [(w.name, w.listed, w.draining_since is not None) for w in workers] == [
        ("elastic-worker-0", True, False),
        ("elastic-worker-1", False, True),
        ("elastic-worker-2", False, True),
        ("elastic-worker-3", False, True),
    ]
    assert abs(workers[1].draining_since.timestamp() - before) < 30

    reasons = [e.reason for e in client.get_events("elastic")]
    for reason in ("MPIJobCreated", "MPIJobRunning", "WorkersScalingUp", "WorkersDraining"):
        assert reason in reasons

    client.delete("elastic")
    eventually(lambda: gone(client, "elastic"))
    eventually(lambda: not core.list_namespaced_pod(namespace, label_selector="mpi-job-name=elastic").items)


def test_scale_bounds_match_admission(client):
    """The client refuses an out-of-bounds scale before sending it, with
    the message the API server gives when the same request reaches it."""
    client.create(elastic_horovod_job("bounds", "img", ["t"], 2, 2, 3))
    for replicas in (1, 4):
        with pytest.raises(InvalidError) as ours:
            client.scale("bounds", replicas)
        with pytest.raises(k8s.ApiException) as raw:  # the same change, sent unchecked
            client.custom.patch_namespaced_custom_object_scale(
                "kubeflow.org", "v1", client.namespace, "mpijobs", "bounds", {"spec": {"replicas": replicas}}
            )
        theirs = APIError.from_api_exception(raw.value)
        assert (theirs.status, theirs.reason) == (422, "Invalid")
        assert theirs.message == 'MPIJob.kubeflow.org "bounds" is invalid: ' + str(ours.value)
    assert client.get("bounds").spec.mpi_replica_specs.worker.replicas == 2


def test_create_from_file_and_dict_list_patch(client):
    from_file = client.create(str(PI))
    assert from_file.metadata.name == "pi" and from_file.metadata.uid

    data = yaml.safe_load(PI.read_text())
    data = copy.deepcopy(data)
    data["metadata"] = {"name": "pi-labelled", "labels": {"team": "vision"}}
    client.create(data)

    assert sorted(j.metadata.name for j in client.list()) == ["pi", "pi-labelled"]
    assert [j.metadata.name for j in client.list(label_selector="team=vision")] == ["pi-labelled"]

    patched = client.patch("pi", {"metadata": {"labels": {"team": "vision"}}})
    assert patched.metadata.labels == {"team": "vision"}
    assert sorted(j.metadata.name for j in client.list(label_selector="team=vision")) == ["pi", "pi-labelled"]
    assert client.namespace in {j.metadata.namespace for j in client.list(all_namespaces=True)}

    with pytest.raises(ConflictError) as err:
        client.create(str(PI))
    assert err.value.message == 'mpijobs.kubeflow.org "pi" already exists'

    for name in ("pi", "pi-labelled"):
        client.delete(name)


def test_admission_errors_carry_the_api_servers_message(client):
    data = yaml.safe_load(PI.read_text())
    del data["spec"]["mpiReplicaSpecs"]["Launcher"]
    data["metadata"]["name"] = "no-launcher"
    with pytest.raises(InvalidError) as err:
        client.create(data)
    assert "spec.mpiReplicaSpecs.Launcher is required: an MPIJob needs exactly one launcher" in err.value.message
    assert err.value.reason == "Invalid"
    with pytest.raises(NotFoundError) as err:
        client.get("nothing-here")
    assert err.value.message == 'mpijobs.kubeflow.org "nothing-here" not found'


def end_launcher(core, namespace, job, phase):
    """Ends the launcher pod as its container's exit would (kwok runs
    none): phase and container state through the status subresource."""
    pod = eventually(lambda: _pod(core, namespace, job + "-launcher"))
    container = pod.spec.containers[0]
    code = 0 if phase == "Succeeded" else 1
    core.patch_namespaced_pod_status(
        job + "-launcher",
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


def _pod(core, namespace, name):
    try:
        return core.read_namespaced_pod(name, namespace)
    except k8s.ApiException:
        return None


def test_wait_for_succeeded(client, core, namespace):
    client.create(elastic_horovod_job("done", "img", ["t"], 1, 1, 2))
    client.wait_for("done", ["Running"], timeout=60)
    end_launcher(core, namespace, "done", "Succeeded")
    job = client.wait_for("done", ["Succeeded"], timeout=60)
    assert [c.reason for c in job.status.conditions if c.type == "Succeeded"] == ["MPIJobSucceeded"]
    assert client.is_succeeded("done") and not client.is_running("done")


def test_wait_for_raises_on_failure(client, core, namespace):
    client.create(elastic_horovod_job("broken", "img", ["t"], 1, 1, 2))
    client.wait_for("broken", ["Running"], timeout=60)
    end_launcher(core, namespace, "broken", "Failed")
    with pytest.raises(JobFailedError) as err:
        client.wait_for("broken", ["Succeeded"], timeout=60)
    assert err.value.job.metadata.name == "broken"
    assert client.is_failed("broken")
    assert client.wait_for("broken", ["Failed"], timeout=5).metadata.name == "broken"


def test_wait_for_times_out_on_a_watch(client):
    client.create(elastic_horovod_job("slow", "img", ["t"], 1, 1, 2))
    client.wait_for("slow", ["Running"], timeout=60)
    start = time.monotonic()
    with pytest.raises(WaitTimeoutError) as err:
        client.wait_for("slow", ["Succeeded"], timeout=3)
    elapsed = time.monotonic() - start
    assert 3 <= elapsed < 15, elapsed
    assert err.value.job.metadata.name == "slow"


def test_get_logs_reports_what_the_api_server_says(client):
    """kwok's nodes serve no kubelet API, so the API server cannot fetch a
    log: the SDK raises its answer (the request path itself is covered by
    tests/unit/test_client.py). A pod that does not exist is NotFound."""
    client.create(elastic_horovod_job("logs", "img", ["t"], 1, 1, 2))
    client.wait_for("logs", ["Running"], timeout=60)
    with pytest.raises(APIError) as err:
        client.get_logs("logs")
    assert "logs-launcher" in err.value.message
    with pytest.raises(APIError) as err:
        client.get_logs("logs", worker=0, container="worker")
    assert "logs-worker-0" in err.value.message
    with pytest.raises(NotFoundError) as err:
        client.get_logs("logs", worker=7)
    assert err.value.message == 'pods "logs-worker-7" not found'


def test_example_runs(kubeconfig, namespace):
    """examples/sdk/elastic_horovod.py, as the README shows it."""
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    example = REPO / "examples" / "sdk" / "elastic_horovod.py"
    out = subprocess.run(
        [sys.executable, str(example), "--namespace", namespace], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "   hosts:   " + " ".join("mnist-elastic-worker-%d:1" % i for i in range(4)) in lines
    assert "   hosts:   mnist-elastic-worker-0:1" in lines
    assert sum("draining since" in line for line in lines) == 3
    assert lines[-1] == "== deleted"
