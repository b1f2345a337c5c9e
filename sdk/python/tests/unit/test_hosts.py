"""discover_hosts.sh parsing, the client-side scale bounds and the elastic
Horovod builder."""

import datetime

import pytest

from mpijob import Host, InvalidError, check_replicas, elastic_horovod_job, horovodrun_command, parse_discover_hosts
from mpijob.client import admission_message
from mpijob.horovod import SSHD_COMMAND
from mpijob.hosts import parse_time
from mpijob.models import V1ElasticPolicy, V1MPIJob, V1MPIJobSpec, V1MPIReplicaSpecs, v1, v2beta1


@pytest.mark.parametrize(
    "script,want",
    [
        ("#!/bin/sh\n", []),
        ("", []),
        (
            "#!/bin/sh\necho pi-worker-0:2\necho pi-worker-10:2\n",
            [Host("pi-worker-0", 2), Host("pi-worker-10", 2)],
        ),
        (  # a GPU launcher first, as the v1 operator writes it
            "#!/bin/sh\necho pi-launcher:1\necho pi-worker-1:1\n",
            [Host("pi-launcher", 1), Host("pi-worker-1", 1)],
        ),
        (  # v2beta1: host names in the job's subdomain, no slots
            "#!/bin/sh\necho pi-worker-0.pi.default.svc\n",
            [Host("pi-worker-0.pi.default.svc", None)],
        ),
        ("#!/bin/sh\n# comment\n\n  echo a:1  \n", [Host("a", 1)]),
    ],
)
def test_parse_discover_hosts(script, want):
    assert parse_discover_hosts(script) == want


@pytest.mark.parametrize("line", ["echo a b", "echo :1", "echo a:x"])
def test_parse_discover_hosts_refuses_what_is_not_a_host(line):
    with pytest.raises(ValueError, match="line 2"):
        parse_discover_hosts("#!/bin/sh\n" + line + "\n")


def test_parse_time_reads_the_operators_format():
    assert parse_time("2026-11-23T16:05:42.936084512Z") == datetime.datetime(
        2026, 11, 23, 16, 5, 42, 936084, tzinfo=datetime.timezone.utc
    )
    assert parse_time(None) is None and parse_time("") is None


def job_with(policy):
    return V1MPIJob(spec=V1MPIJobSpec(elastic_policy=policy, mpi_replica_specs=V1MPIReplicaSpecs()))


FIELD = "spec.mpiReplicaSpecs.Worker.replicas: Invalid value: "


@pytest.mark.parametrize(
    "policy,replicas,message",
    [
        (V1ElasticPolicy(min_replicas=2, max_replicas=4), 1, "must not be less than spec.elasticPolicy.minReplicas (either one unset means 1)"),
        (V1ElasticPolicy(min_replicas=2, max_replicas=4), 5, "must not be more than spec.elasticPolicy.maxReplicas (unset replicas mean 1)"),
        (V1ElasticPolicy(max_replicas=4), 0, "must not be less than spec.elasticPolicy.minReplicas (either one unset means 1)"),
        (None, -1, "must be 0 or more"),
        (V1ElasticPolicy(), 5001, None),  # no maxReplicas: the API server's own bound
        (V1ElasticPolicy(min_replicas=2, max_replicas=4), 2, None),
        (V1ElasticPolicy(min_replicas=2, max_replicas=4), 4, None),
        (None, 0, None),
    ],
)
def test_check_replicas(policy, replicas, message):
    job = job_with(policy)
    if message is None:
        check_replicas(job, replicas, v1.VALIDATION_MESSAGES)
        return
    with pytest.raises(InvalidError) as err:
        check_replicas(job, replicas, v1.VALIDATION_MESSAGES)
    assert str(err.value) == FIELD + message
    assert (err.value.status, err.value.reason) == (422, "Invalid")


@pytest.mark.parametrize("module", [v1, v2beta1])
@pytest.mark.parametrize(
    "field,words",
    [
        ("spec.mpiReplicaSpecs.Worker.replicas", "less than"),
        ("spec.mpiReplicaSpecs.Worker.replicas", "more than"),
        ("spec.mpiReplicaSpecs.Worker.replicas", "0 or more"),
        ("spec.elasticPolicy.minReplicas", "more than"),
    ],
)
def test_every_bound_has_its_admission_message(module, field, words):
    """The client's checks find their message among the CRD's rules in
    both versions; a CRD that drops one fails here, not at a user's scale."""
    message = admission_message(module.VALIDATION_MESSAGES, field, words)
    assert message.startswith(field + ": Invalid value: ")
    assert words in message


def test_check_replicas_refuses_what_is_not_an_int():
    with pytest.raises(TypeError):
        check_replicas(job_with(None), "3", v1.VALIDATION_MESSAGES)


def test_horovodrun_command():
    assert horovodrun_command(["python", "train.py"], 2, 1, 4, slots_per_worker=2) == [
        "horovodrun", "-np", "4", "--min-np", "2", "--max-np", "8",
        "--host-discovery-script", "/etc/mpi/discover_hosts.sh",
        "--blacklist-cooldown-range", "10", "100", "python", "train.py",
    ]  # fmt: skip
    assert horovodrun_command(["t"], 1, 1, 1, version="v2beta1", blacklist_cooldown=None) == [
        "horovodrun", "-np", "1", "--min-np", "1", "--max-np", "1",
        "--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--slots-per-host", "1", "t",
    ]  # fmt: skip


def test_elastic_horovod_job_v1():
    job = elastic_horovod_job(
        "mnist",
        "horovod/horovod:0.28.1",
        ["python", "train.py"],
        initial_workers=2,
        min_workers=1,
        max_workers=4,
        gpus_per_worker=2,
        resources={"cpu": 4, "memory": "16Gi"},
        namespace="team-a",
        labels={"team": "a"},
        drain_seconds=20,
        env={"NCCL_DEBUG": "INFO"},
    )
    assert isinstance(job, V1MPIJob)
    env = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    requests = {"cpu": "4", "memory": "16Gi"}
    limits = dict(requests, **{"nvidia.com/gpu": "2"})  # GPUs as a limit only
    assert job.to_dict() == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "mnist", "namespace": "team-a", "labels": {"team": "a"}},
        "spec": {
            "slotsPerWorker": 2,
            "cleanPodPolicy": "Running",
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "drainSeconds": 20},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": {"team": "a"}},  # the pods carry the job's labels
                        "spec": {
                            "containers": [
                                {
                                    "name": "mpi-launcher",
                                    "image": "horovod/horovod:0.28.1",
                                    "env": env,
                                    "command": [
                                        "horovodrun", "-np", "4", "--min-np", "2", "--max-np", "8",
                                        "--host-discovery-script", "/etc/mpi/discover_hosts.sh",
                                        "--blacklist-cooldown-range", "10", "100", "python", "train.py",
                                    ],  # fmt: skip
                                }
                            ]
                        }
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "metadata": {"labels": {"team": "a"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "mpi-worker",
                                    "image": "horovod/horovod:0.28.1",
                                    "env": env,
                                    "resources": {"limits": limits, "requests": requests},
                                }
                            ]
                        }
                    },
                },
            },
        },
    }


def test_elastic_horovod_job_v2beta1():
    job = elastic_horovod_job("mnist", "img", ["python", "t.py"], 3, 2, 6, slots_per_worker=4, version="v2beta1")
    assert isinstance(job, v2beta1.V2beta1MPIJob)
    data = job.to_dict()
    assert data["apiVersion"] == "kubeflow.org/v2beta1"
    assert "mpiImplementation" not in data["spec"]  # the operator's default, OpenMPI
    assert data["spec"]["slotsPerWorker"] == 4
    assert data["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert data["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 6, "drainSeconds": 30}
    command = data["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert command[:11] == [
        "horovodrun", "-np", "12", "--min-np", "8", "--max-np", "24",
        "--host-discovery-script", "/etc/mpi/discover_hosts.sh", "--slots-per-host", "4",
    ]  # fmt: skip
    worker = data["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] + worker["args"] == SSHD_COMMAND
    assert "/usr/sbin/sshd -De" in worker["args"][-1]


@pytest.mark.parametrize(
    "version,worker_command,want",
    [
        ("v1", None, None),
        ("v1", ["sleep", "infinity"], ["sleep", "infinity"]),
        ("v2beta1", [], None),
        ("v2beta1", ["/usr/sbin/sshd", "-De"], ["/usr/sbin/sshd", "-De"]),
    ],
)
def test_elastic_horovod_job_worker_command(version, worker_command, want):
    job = elastic_horovod_job("j", "img", ["t"], 1, 1, 2, version=version, worker_command=worker_command)
    worker = job.to_dict()["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker.get("command") == want


@pytest.mark.parametrize(
    "initial,low,high,message",
    [
        (1, 2, 4, FIELD + "must not be less than spec.elasticPolicy.minReplicas (either one unset means 1)"),
        (5, 1, 4, FIELD + "must not be more than spec.elasticPolicy.maxReplicas (unset replicas mean 1)"),
        (2, 3, 2, "spec.elasticPolicy.minReplicas: Invalid value: must not be more than spec.elasticPolicy.maxReplicas"),
    ],
)
def test_elastic_horovod_job_refuses_bad_bounds(initial, low, high, message):
    with pytest.raises(InvalidError) as err:
        elastic_horovod_job("j", "img", ["t"], initial, low, high)
    assert str(err.value) == message


def test_elastic_horovod_job_needs_a_command():
    with pytest.raises(ValueError, match="command"):
        elastic_horovod_job("j", "img", [], 1, 1, 1)


def test_elastic_horovod_job_refuses_an_unknown_version():
    with pytest.raises(ValueError, match="v1 or v2beta1"):
        elastic_horovod_job("j", "img", ["t"], 1, version="v2")


def test_elastic_horovod_job_blacklist_cooldown_left_out():
    job = elastic_horovod_job("j", "img", ["t"], 1, blacklist_cooldown=None)
    command = job.to_dict()["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert "--blacklist-cooldown-range" not in command
