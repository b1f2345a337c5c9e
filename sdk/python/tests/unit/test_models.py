"""The generated models: their shape, their JSON round trip, and the
generator's determinism and stale check."""

import copy
import datetime
import importlib.util
import pathlib
import shutil

import pytest
import yaml
from kubernetes import client as k8s

from mpijob import models
from mpijob.models import V1ElasticPolicy, V1JobCondition, V1JobStatus, V1MPIJob, V1ReplicaStatus, v2beta1

REPO = pathlib.Path(__file__).resolve().parents[4]
SDKGEN = REPO / "hack" / "sdkgen" / "sdkgen.py"


def load_sdkgen():
    spec = importlib.util.spec_from_file_location("sdkgen", SDKGEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example(path):
    with open(REPO / path, encoding="utf-8") as f:
        return yaml.safe_load(f)


STORED_JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "team-a", "labels": {"team": "a"}, "resourceVersion": "42"},
    "spec": {
        "slotsPerWorker": 2,
        "cleanPodPolicy": "Running",
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "drainSeconds": 10},
        "runPolicy": {"backoffLimit": 3, "schedulingPolicy": {"minResources": {"cpu": "4", "memory": "8Gi"}}},
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "l", "image": "img", "command": ["mpirun", "pi"]}]}},
            },
            "Worker": {
                "replicas": 2,
                "restartPolicy": "Never",
                "template": {"spec": {"containers": [{"name": "w", "image": "img", "resources": {"limits": {"cpu": "1"}}}]}},
            },
        },
    },
    "status": {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "MPIJobCreated",
                "message": "MPIJob team-a/pi is created.",
                "lastTransitionTime": "2026-11-23T16:00:00+00:00",
                "lastUpdateTime": "2026-11-23T16:00:00+00:00",
            }
        ],
        "replicaStatuses": {"Worker": {"active": 2, "selector": "mpi-job-name=pi,mpi-job-role=worker"}},
        "startTime": "2026-11-23T16:00:01+00:00",
    },
}


def test_round_trip_keeps_every_field():
    job = V1MPIJob.from_dict(copy.deepcopy(STORED_JOB))
    assert job.to_dict() == STORED_JOB


def test_from_dict_builds_typed_objects():
    job = V1MPIJob.from_dict(copy.deepcopy(STORED_JOB))
    t = datetime.datetime(2026, 11, 23, 16, 0, tzinfo=datetime.timezone.utc)
    assert job.spec.elastic_policy == V1ElasticPolicy(min_replicas=1, max_replicas=4, drain_seconds=10)
    assert job.status == V1JobStatus(
        conditions=[
            V1JobCondition(
                type="Created",
                status="True",
                reason="MPIJobCreated",
                message="MPIJob team-a/pi is created.",
                last_transition_time=t,
                last_update_time=t,
            )
        ],
        replica_statuses={"Worker": V1ReplicaStatus(active=2, selector="mpi-job-name=pi,mpi-job-role=worker")},
        start_time=t + datetime.timedelta(seconds=1),
    )
    assert isinstance(job.metadata, k8s.V1ObjectMeta)
    assert isinstance(job.spec.mpi_replica_specs.worker.template, k8s.V1PodTemplateSpec)
    assert job.spec.mpi_replica_specs.worker.template.spec.containers[0].resources.limits == {"cpu": "1"}


def test_unknown_fields_are_ignored():
    data = copy.deepcopy(STORED_JOB)
    data["spec"]["someFutureField"] = {"x": 1}
    assert V1MPIJob.from_dict(data).to_dict() == STORED_JOB


@pytest.mark.parametrize(
    "path,cls",
    [
        ("examples/v1/elastic/tensorflow-mnist-elastic.yaml", models.V1MPIJob),
        ("examples/v1/pi/pi.yaml", models.V1MPIJob),
        ("examples/v2beta1/elastic/tensorflow-mnist-elastic.yaml", v2beta1.V2beta1MPIJob),
    ],
)
def test_examples_parse(path, cls):
    data = example(path)
    job = cls.from_dict(data)
    assert job.metadata.name == data["metadata"]["name"]
    assert job.spec.mpi_replica_specs.worker.replicas == data["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert job.spec.slots_per_worker == data["spec"].get("slotsPerWorker")
    launcher = data["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert job.spec.mpi_replica_specs.launcher.template.spec.containers[0].command == launcher.get("command")


def test_every_crd_property_has_an_attribute():
    """Each property of the v1 schema outside the Kubernetes types is an
    attribute of its class, under its JSON name."""
    crd = yaml.load((REPO / "manifests/base/crd.yaml").read_text(), Loader=load_sdkgen().LOADER)
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    assert sorted(models.V1MPIJobSpec.attribute_map.values()) == sorted(spec)
    assert sorted(models.V1ElasticPolicy.attribute_map.values()) == sorted(spec["elasticPolicy"]["properties"])
    assert sorted(models.V1RunPolicy.attribute_map.values()) == sorted(spec["runPolicy"]["properties"])


def test_v2beta1_has_its_own_fields():
    assert v2beta1.V2beta1MPIJobSpec.attribute_map["run_launcher_as_worker"] == "runLauncherAsWorker"
    assert v2beta1.V2beta1RunPolicy.attribute_map["suspend"] == "suspend"
    assert v2beta1.API_VERSION == "kubeflow.org/v2beta1"


def test_required_fields_are_constructor_arguments():
    with pytest.raises(TypeError):
        models.V1MPIJobSpec()  # pylint: disable=no-value-for-parameter


def test_generator_is_deterministic_and_models_are_fresh():
    sdkgen = load_sdkgen()
    first, second = sdkgen.outputs(str(REPO)), sdkgen.outputs(str(REPO))
    assert first == second
    for rel, text in first.items():
        assert (REPO / rel).read_text() == text, rel + " is stale: run hack/sdkgen/sdkgen.py"


def test_check_fails_on_stale_models(tmp_path, capsys):
    """--check passes on fresh models and names the file when a CRD's
    description changed and the models were not regenerated."""
    sdkgen = load_sdkgen()
    for rel in ["manifests/base/crd.yaml", "v2/manifests/base/crd.yaml"] + list(sdkgen.outputs(str(REPO))):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    assert sdkgen.main(["--check", "--root", str(tmp_path)]) == 0

    crd = tmp_path / "manifests/base/crd.yaml"
    crd.write_text(crd.read_text().replace("DrainSeconds is how long", "DrainSeconds says how long"))
    assert sdkgen.main(["--check", "--root", str(tmp_path)]) == 1
    assert "sdk/python/mpijob/models/v1.py" in capsys.readouterr().err

    assert sdkgen.main(["--root", str(tmp_path)]) == 0
    assert "DrainSeconds says how long" in (tmp_path / "sdk/python/mpijob/models/v1.py").read_text()
    assert sdkgen.main(["--check", "--root", str(tmp_path)]) == 0
