"""MPIJobClient against a real kube-apiserver (CRD, CEL admission rules,
scale subresource) with the v1 operator running as a process and kwok
nodes: pods reach Running about half a second after they are created, and
run no container; kwok serves the logs that the tests' kwok Logs objects
name (run-tests.sh sets KWOK_SERVER_PORT)."""

import copy
import os
import pathlib
import queue
import subprocess
import sys
import threading
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

from conftest import active_workers, cri_log, end_pod, eventually, gone, serve_log  # pylint: disable=import-error

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
    """Ends the launcher pod <job>-launcher as its container's exit would."""
    end_pod(core, namespace, job + "-launcher", phase)


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


@pytest.fixture(name="logs_job")
def logs_job_fixture(client, custom, namespace, tmp_path):
    """A running job "logs" with 2 workers whose launcher and worker 0 log
    what the files returned (launcher, worker) hold; worker 1 has no Logs of
    its own, so the cluster's ClusterLogs "default" serves it an empty log."""
    client.create(elastic_horovod_job("logs", "img", ["t"], 2, 1, 2))
    client.wait_for("logs", until=active_workers(2), timeout=60)
    launcher, worker = tmp_path / "launcher.log", tmp_path / "worker-0.log"
    cri_log(launcher, "rank 0: starting", "epoch 1 loss 0.9", "epoch 2 loss 0.4", "done")
    cri_log(worker, "worker 0 ready")
    serve_log(custom, namespace, "logs-launcher", "mpi-launcher", launcher)
    serve_log(custom, namespace, "logs-worker-0", "mpi-worker", worker)
    # kwok learns of the objects through its watch
    eventually(lambda: client.get_logs("logs") != "" and client.get_logs("logs", worker=0) != "")
    return launcher, worker


def test_get_logs_whole_tail_and_container(client, logs_job):
    launcher_log = "rank 0: starting\nepoch 1 loss 0.9\nepoch 2 loss 0.4\ndone\n"
    assert client.get_logs("logs") == launcher_log
    assert client.get_logs("logs", container="mpi-launcher") == launcher_log
    assert client.get_logs("logs", tail_lines=2) == "epoch 2 loss 0.4\ndone\n"
    assert client.get_logs("logs", tail_lines=0) == ""
    assert client.get_logs("logs", worker=0, container="mpi-worker") == "worker 0 ready\n"
    assert client.get_logs("logs", worker="logs-worker-0", tail_lines=1) == "worker 0 ready\n"
    assert client.get_logs("logs", worker=1) == ""

    # the file grows as a running container's log does
    cri_log(logs_job[0], "one more line")
    assert client.get_logs("logs", tail_lines=1) == "one more line\n"

    with pytest.raises(APIError) as err:
        client.get_logs("logs", container="mpi-worker")
    assert "container mpi-worker is not valid for pod logs-launcher" in err.value.message
    with pytest.raises(NotFoundError) as err:
        client.get_logs("logs", worker=7)
    assert err.value.message == 'pods "logs-worker-7" not found'


def test_get_logs_follow_reads_appended_lines(client, logs_job):
    """follow=True yields the lines there are, then those written after the
    call started, until the reader stops."""
    got = queue.Queue()

    def read():
        for line in client.get_logs("logs", worker=0, follow=True):
            got.put(line)
            if line == "worker 0 stopping":
                break  # closes the iterator, and with it the stream
        got.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert got.get(timeout=30) == "worker 0 ready"
    time.sleep(0.5)
    assert got.empty()  # nothing more until the container writes
    cri_log(logs_job[1], "worker 0 step 1")
    assert got.get(timeout=30) == "worker 0 step 1"
    cri_log(logs_job[1], "worker 0 step 2", "worker 0 stopping")
    assert [got.get(timeout=30) for _ in range(3)] == ["worker 0 step 2", "worker 0 stopping", None]
    reader.join(timeout=10)
    assert not reader.is_alive()


def test_kubeflow_names_conditions_and_waits(client, core, namespace):
    """create_job, wait_for_job_conditions on a watch and by polling, the
    conditions and is_job_*, a timeout, Succeeded, and delete_job."""
    created = client.create_job(elastic_horovod_job("kf", "img", ["t"], 1, 1, 2), job_kind="MPIJob")
    assert created.metadata.namespace == namespace

    job = client.wait_for_job_conditions("kf", expected_conditions={"Running"}, timeout=60)
    true = {c.type for c in client.get_job_conditions(job=job) if c.status == "True"}
    assert {"Created", "Running"} <= true and not true & {"Succeeded", "Failed", "Restarting"}
    assert client.is_job_created("kf") and client.is_job_running("kf")
    assert not (client.is_job_restarting("kf") or client.is_job_succeeded("kf") or client.is_job_failed("kf"))
    assert [c.type for c in client.get_job_conditions("kf")] == [c.type for c in job.status.conditions]

    seen = []
    polled = client.wait_for_job_conditions("kf", expected_conditions={"Running"}, timeout=10, polling_interval=0.5, callback=seen.append)
    assert polled.metadata.name == "kf" and len(seen) == 1

    for polling_interval in (None, 0.5):
        start = time.monotonic()
        with pytest.raises(TimeoutError) as err:
            client.wait_for_job_conditions("kf", expected_conditions={"Succeeded"}, timeout=2, polling_interval=polling_interval)
        assert 2 <= time.monotonic() - start < 12
        assert isinstance(err.value, WaitTimeoutError) and client.is_job_running(job=err.value.job)

    end_launcher(core, namespace, "kf", "Succeeded")
    done = client.wait_for_job_conditions("kf", timeout=60, polling_interval=0.5)
    assert client.is_job_succeeded(job=done) and not client.is_job_running(job=done)
    assert client.wait_for_job_conditions("kf", expected_conditions={"Succeeded"}, timeout=5).metadata.uid == created.metadata.uid

    client.delete_job("kf")
    eventually(lambda: gone(client, "kf"))
    with pytest.raises(NotFoundError):
        client.wait_for_job_conditions("kf", timeout=5)
    assert "kf" not in [j.metadata.name for j in client.list_jobs()]


@pytest.mark.parametrize("polling_interval", [None, 0.2])
def test_wait_for_job_conditions_raises_not_found_when_the_job_is_deleted(client, polling_interval):
    """A wait whose job is deleted meanwhile raises NotFoundError, on a
    watch (its DELETED event) and when polling."""
    client.create_job(elastic_horovod_job("bye", "img", ["t"], 1, 1, 2))
    client.wait_for_job_conditions("bye", expected_conditions={"Running"}, timeout=60)
    outcome = queue.Queue()

    def wait():
        try:
            outcome.put(client.wait_for_job_conditions("bye", timeout=60, polling_interval=polling_interval))
        except Exception as err:  # pylint: disable=broad-except
            outcome.put(err)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    time.sleep(1)
    client.delete_job("bye")
    err = outcome.get(timeout=60)
    assert isinstance(err, NotFoundError), repr(err)
    assert (err.status, err.reason) == (404, "NotFound")


def test_get_job_pods_and_logs(client, custom, namespace, tmp_path):
    """get_job_pods and get_job_logs of every pod, of a role, of an index:
    the launcher's and worker 0's logs are the files kwok serves for them;
    worker 1 has none of its own, so ClusterLogs "default" gives it ''."""
    client.create_job(elastic_horovod_job("pods", "img", ["t"], 2, 1, 2))
    client.wait_for_workers("pods", 2, timeout=60, polling_interval=0.2)
    pods = client.get_job_pods("pods")
    assert [p.metadata.name for p in pods] == ["pods-launcher", "pods-worker-0", "pods-worker-1"]
    assert all(p.metadata.namespace == namespace for p in pods)
    assert client.get_job_pod_names("pods", role="launcher") == client.get_job_pod_names("pods", is_master=True) == ["pods-launcher"]
    assert client.get_job_pod_names("pods", replica_type="Worker") == ["pods-worker-0", "pods-worker-1"]
    assert client.get_job_pod_names("pods", replica_index=1) == ["pods-worker-1"]

    launcher, worker = tmp_path / "launcher.log", tmp_path / "worker-0.log"
    cri_log(launcher, "rank 0: starting", "done")
    cri_log(worker, "worker 0 ready")
    serve_log(custom, namespace, "pods-launcher", "mpi-launcher", launcher)
    serve_log(custom, namespace, "pods-worker-0", "mpi-worker", worker)
    want = {"pods-launcher": "rank 0: starting\ndone\n", "pods-worker-0": "worker 0 ready\n", "pods-worker-1": ""}
    logs = eventually(lambda: (lambda got: got if got == want else None)(client.get_job_logs("pods")))
    assert list(logs) == ["pods-launcher", "pods-worker-0", "pods-worker-1"]
    assert client.get_job_logs("pods", is_master=True, tail_lines=1) == {"pods-launcher": "done\n"}
    assert client.get_job_logs("pods", role="worker", container="mpi-worker") == {"pods-worker-0": "worker 0 ready\n", "pods-worker-1": ""}
    assert client.get_job_logs("pods", replica_index=0) == {"pods-worker-0": "worker 0 ready\n"}
    assert client.get_job_logs("pods", pod_name="pods-worker-0") == {"pods-worker-0": "worker 0 ready\n"}
    assert client.get_logs("pods") == want["pods-launcher"]
    with pytest.raises(APIError) as err:
        client.get_job_logs("pods", container="mpi-launcher")  # the workers have no such container
    assert "container mpi-launcher is not valid for pod pods-worker-0" in err.value.message
    with pytest.raises(NotFoundError):
        client.get_job_pods("no-such-job")


def listed(client, name):
    return [w.name for w in client.get_workers(name) if w.listed]


def test_scale_job_and_scale_in_job(client, namespace):
    """scale_job out (waits until the new workers run and are listed),
    scale_in_job by name (the operator removes the named worker, not the
    highest index it would choose), scale_job in by count (waits out the
    drain until the pods are gone)."""
    client.create_job(elastic_horovod_job("sc", "img", ["t"], 2, 1, 4, drain_seconds=2))
    client.wait_for_workers("sc", 2, timeout=60, polling_interval=0.2)

    job = client.scale_job("sc", 4, timeout=60, polling_interval=0.2)
    assert job.status.replica_statuses["Worker"].active == 4
    assert listed(client, "sc") == ["sc-worker-%d" % i for i in range(4)]
    assert client.get_hosts("sc") == hosts("sc", 4)

    job = client.scale_in_job("sc", ["sc-worker-1"], timeout=60, polling_interval=0.2)
    assert job.spec.mpi_replica_specs.worker.replicas == 3
    assert listed(client, "sc") == ["sc-worker-0", "sc-worker-2", "sc-worker-3"]
    assert [w.name for w in client.get_workers("sc") if w.phase == "Running"] == ["sc-worker-0", "sc-worker-2", "sc-worker-3"]
    assert "WorkersDraining" in [e.reason for e in client.get_events("sc")]

    start = time.monotonic()
    client.scale_job("sc", 2, timeout=60, polling_interval=0.2)
    assert time.monotonic() - start >= 2  # the removed worker drained for drainSeconds first
    assert listed(client, "sc") == ["sc-worker-0", "sc-worker-2"]
    assert [n for n in client.get_job_pod_names("sc", role="worker") if n != "sc-worker-3"] == ["sc-worker-0", "sc-worker-2"]

    with pytest.raises(ValueError, match="sc-worker-1 is not a worker"):
        client.scale_in_job("sc", "sc-worker-1")
    with pytest.raises(InvalidError, match="minReplicas"):
        client.scale_in_job("sc", ["sc-worker-0", "sc-worker-2"])
    assert client.get_job("sc").spec.mpi_replica_specs.worker.replicas == 2


def test_example_runs(kubeconfig, namespace):
    """examples/sdk/elastic_horovod.py, as docs/sdk.md shows it."""
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
