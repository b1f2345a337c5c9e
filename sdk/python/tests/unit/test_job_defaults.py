"""elastic_horovod_job builds of each request in pkg/jobdefaults/testdata
the golden job there, the one that `kubectl mpijob submit` builds of it
too (pkg/plugin/golden_test.go holds the plugin to the same files), and
reads the same defaults as the plugin."""

import json
from pathlib import Path

import pytest
import yaml

from mpijob import elastic_horovod_job, job_defaults

ROOT = Path(__file__).resolve().parents[4]
GOLDEN = ROOT / "pkg" / "jobdefaults" / "testdata"
REQUESTS = sorted(GOLDEN.glob("*.request.json"))


def test_there_are_golden_requests():
    assert REQUESTS, "no *.request.json in %s" % GOLDEN


def test_the_package_ships_the_plugins_defaults():
    """The installed package's job-defaults.json is the plugin's; `make
    generate` copies it."""
    canonical = (ROOT / "pkg" / "jobdefaults" / "job-defaults.json").read_text(encoding="utf-8")
    assert job_defaults.load() == json.loads(canonical)


@pytest.mark.parametrize("version", ["v1", "v2beta1"])
@pytest.mark.parametrize("request_file", REQUESTS, ids=lambda p: p.name.split(".")[0])
def test_builds_the_golden_job(request_file, version):
    request = json.loads(request_file.read_text(encoding="utf-8"))
    job = elastic_horovod_job(
        request["name"],
        request["image"],
        request["command"],
        initial_workers=request["workers"],
        min_workers=request.get("minWorkers"),
        max_workers=request.get("maxWorkers"),
        gpus_per_worker=request.get("gpus", 0),
        labels=request.get("labels"),
        annotations=request.get("annotations"),
        # a list in the request, since its order is the containers'
        env={e["name"]: e["value"] for e in request.get("env", [])},
        version=version,
    )
    golden = request_file.with_name(request_file.name.replace("request.json", version + ".yaml"))
    want = yaml.safe_load(golden.read_text(encoding="utf-8"))
    assert prune(job.to_dict()) == prune(want)


def prune(value):
    """A JSON value without nulls and empty objects and lists, which the
    API server drops alike (the Go test prunes the same way)."""
    if isinstance(value, dict):
        out = {k: prune(v) for k, v in value.items()}
        out = {k: v for k, v in out.items() if v is not None}
        return out or None
    if isinstance(value, list):
        return [prune(v) for v in value] or None
    return value
