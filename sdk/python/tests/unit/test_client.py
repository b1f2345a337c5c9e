"""MPIJobClient's requests, against a stub API server on 127.0.0.1 that
records what the kubernetes client sends and answers what the test says:
paths, query parameters, content types and bodies, and how answers become
models and errors. The behaviour against a real API server and operator is
in tests/cluster."""

import http.server
import json
import threading
import time
import urllib.parse

import pytest
from kubernetes import client as k8s

from mpijob import ConflictError, InvalidError, JobFailedError, MPIJobClient, MPIJobError, NotFoundError, WaitTimeoutError
from mpijob.errors import APIError

STUB_PORT = 29085  # of the SDK's ports (29080-29089); below the ephemeral range

JOBS = "/apis/kubeflow.org/v1/namespaces/ns/mpijobs"


def mpijob(name="pi", conditions=(), resource_version="1", policy=None):
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": resource_version},
        "spec": {
            "elasticPolicy": policy or {"minReplicas": 1, "maxReplicas": 4},
            "mpiReplicaSpecs": {"Worker": {"replicas": 2}},
        },
        "status": {
            "conditions": [{"type": c, "status": s, "reason": "R", "message": "m " + c} for c, s in conditions],
            "replicaStatuses": {},
        },
    }


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}


PODS = "/api/v1/namespaces/ns/pods"


def v1_pod(name, role, index=None, containers=("main",), annotations=None):
    labels = {"mpi-job-name": "pi", "mpi-job-role": role}
    if index is not None:
        labels["replica-index"] = str(index)
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": c} for c in containers]},
        "status": {"phase": "Running"},
    }


class Stub:
    """Routes (method, path) to answers: (code, JSON body) or (code, [raw
    chunks]) for a streamed answer; records each request."""

    def __init__(self):
        self.routes = {}
        self.requests = []

    def route(self, method, path, code, body):
        self.routes[(method, path)] = [(code, body)]

    def route_in_turn(self, method, path, *answers):
        """Answers (code, body) in turn; the last one stays."""
        self.routes[(method, path)] = list(answers)

    def answer_for(self, method, path):
        answers = self.routes.get((method, path))
        if not answers:
            return 404, status(404, "NotFound", "no route")
        return answers.pop(0) if len(answers) > 1 else answers[0]

    def handler(self):
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def answer(self):
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stub.requests.append(
                    {
                        "method": self.command,
                        "path": url.path,
                        "query": dict(urllib.parse.parse_qsl(url.query)),
                        "content_type": self.headers.get("Content-Type"),
                        "body": json.loads(body) if body else None,
                    }
                )
                code, payload = stub.answer_for(self.command, url.path)
                self.send_response(code)
                if isinstance(payload, list):  # streamed, chunked
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in payload:
                        data = chunk.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = answer

        return Handler


@pytest.fixture(name="stub", scope="module")
def stub_server():
    stub = Stub()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", STUB_PORT), stub.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stub
    server.shutdown()
    server.server_close()


@pytest.fixture(name="client")
def client_fixture(stub):
    stub.routes.clear()
    stub.requests.clear()
    conf = k8s.Configuration(host="http://127.0.0.1:%d" % STUB_PORT)
    return MPIJobClient(namespace="ns", api_client=k8s.ApiClient(conf))


def test_create_from_a_yaml_file(stub, client, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n" + json.dumps(mpijob()))
    stub.route("POST", JOBS, 201, mpijob(resource_version="7"))
    job = client.create(str(path))
    assert job.metadata.resource_version == "7"
    assert stub.requests[0]["body"] == mpijob()


def test_create_from_a_dict_defaults_kind_and_namespace(stub, client):
    stub.route("POST", "/apis/kubeflow.org/v1/namespaces/other/mpijobs", 201, mpijob())
    body = {"metadata": {"name": "pi", "namespace": "other"}, "spec": {"mpiReplicaSpecs": {}}}
    client.create(body)
    assert stub.requests[0]["body"] == dict(body, apiVersion="kubeflow.org/v1", kind="MPIJob")


def test_create_refuses_another_version(client):
    with pytest.raises(ValueError, match="v2beta1"):
        client.create({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"})


def test_create_refuses_a_file_without_exactly_one_job(client, tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(json.dumps(mpijob("a")) + "\n---\n" + json.dumps(mpijob("b")))
    with pytest.raises(ValueError, match="holds 2 MPIJobs"):
        client.create(path)


@pytest.mark.parametrize(
    "code,reason,error",
    [(404, "NotFound", NotFoundError), (409, "AlreadyExists", ConflictError), (422, "Invalid", InvalidError), (403, "Forbidden", APIError)],
)
def test_errors_carry_the_api_servers_message(stub, client, code, reason, error):
    message = 'mpijobs.kubeflow.org "pi" says %s' % reason
    stub.route("GET", JOBS + "/pi", code, status(code, reason, message))
    with pytest.raises(error) as err:
        client.get("pi")
    assert (str(err.value), err.value.message, err.value.status, err.value.reason) == (message, message, code, reason)


def test_an_error_without_a_status_body(stub, client):
    stub.route("GET", JOBS + "/pi", 503, "upstream connect error")
    with pytest.raises(APIError) as err:
        client.get("pi")
    assert err.value.status == 503
    assert "503" in str(err.value)


def test_list_with_a_label_selector(stub, client):
    stub.route("GET", JOBS, 200, {"items": [mpijob("a"), mpijob("b")]})
    jobs = client.list(label_selector="team=a")
    assert [j.metadata.name for j in jobs] == ["a", "b"]
    assert stub.requests[0]["query"] == {"labelSelector": "team=a"}


def test_patch_sends_a_merge_patch(stub, client):
    stub.route("PATCH", JOBS + "/pi", 200, mpijob())
    client.patch("pi", {"metadata": {"labels": {"team": "b"}}})
    assert stub.requests[0]["content_type"] == "application/merge-patch+json"
    assert stub.requests[0]["body"] == {"metadata": {"labels": {"team": "b"}}}


def test_delete_propagates_in_the_foreground(stub, client):
    stub.route("DELETE", JOBS + "/pi", 200, status(200, "", ""))
    client.delete("pi")
    assert stub.requests[0]["body"]["propagationPolicy"] == "Foreground"


def test_scale_goes_through_the_scale_subresource(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 3}})
    client.scale("pi", 3)
    patch = [r for r in stub.requests if r["method"] == "PATCH"]
    assert [(p["path"], p["content_type"], p["body"]) for p in patch] == [
        (JOBS + "/pi/scale", "application/merge-patch+json", {"spec": {"replicas": 3}})
    ]


def test_scale_out_of_bounds_sends_nothing(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    with pytest.raises(InvalidError, match="must not be more than spec.elasticPolicy.maxReplicas"):
        client.scale("pi", 5)
    assert [r["method"] for r in stub.requests] == ["GET"]


CONFIG = "/api/v1/namespaces/ns/configmaps/pi-config"


def with_active(job, active, replicas=None):
    """The job with the status's count of active workers, and asking for
    replicas workers when given."""
    job["status"]["replicaStatuses"] = {"Worker": {"active": active}}
    if replicas is not None:
        job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = replicas
    return job


def workers(*specs):
    """Worker pods of job pi: (index, phase) or (index, phase, annotations)."""
    items = []
    for spec in specs:
        index, phase, annotations = (spec + (None,))[:3]
        pod = v1_pod("pi-worker-%d" % index, "worker", index, annotations=annotations)
        pod["status"]["phase"] = phase
        items.append(pod)
    return {"items": items}


def hosts_config(*indices, fmt="pi-worker-%d:1"):
    return {"data": {"discover_hosts.sh": "#!/bin/sh\n" + "".join("echo %s\n" % (fmt % i) for i in indices)}}


def test_scale_job_waits_until_exactly_the_replicas_are_at_work(stub, client):
    """Out from 2 to 3: not done while the new worker is Pending, nor while
    it runs but discover_hosts.sh does not list it yet."""
    stub.route_in_turn(
        "GET",
        JOBS + "/pi",
        (200, with_active(mpijob(), 2)),
        (200, with_active(mpijob(), 2)),
        (200, with_active(mpijob(), 3)),
        (200, with_active(mpijob(resource_version="9"), 3)),
    )
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 3}})
    stub.route_in_turn(
        "GET",
        PODS,
        (200, workers((0, "Running"), (1, "Running"), (2, "Pending"))),
        (200, workers((0, "Running"), (1, "Running"), (2, "Running"))),
    )
    stub.route_in_turn("GET", CONFIG, (200, hosts_config(0, 1)), (200, hosts_config(0, 1)), (200, hosts_config(0, 1, 2)))
    job = client.scale_job("pi", 3, timeout=30, polling_interval=0.01)
    assert job.metadata.resource_version == "9"
    assert [r["path"] for r in stub.requests if r["method"] == "PATCH"] == [JOBS + "/pi/scale"]
    assert sum(r["path"] == CONFIG for r in stub.requests) == 3
    assert {r["query"]["labelSelector"] for r in stub.requests if r["path"] == PODS} == {"mpi-job-name=pi,mpi-job-role=worker"}


def test_wait_for_workers_changes_nothing(stub, client):
    stub.route_in_turn("GET", JOBS + "/pi", (200, with_active(mpijob(), 1)), (200, with_active(mpijob(), 2)))
    stub.route("GET", PODS, 200, workers((0, "Running"), (1, "Running")))
    stub.route("GET", CONFIG, 200, hosts_config(0, 1))
    client.wait_for_workers("pi", 2, timeout=30, polling_interval=0.01)
    assert {r["method"] for r in stub.requests} == {"GET"}
    assert sum(r["path"] == JOBS + "/pi" for r in stub.requests) == 2


def test_scale_job_in_waits_for_the_drained_pods_to_go(stub, client):
    """In from 3 to 2: the removed worker leaves discover_hosts.sh at once
    but counts as active until its pod is deleted after the drain."""
    draining = {"mpi-operator.kubeflow.org/draining-since": "2026-11-23T16:05:42Z"}
    stub.route_in_turn("GET", JOBS + "/pi", (200, with_active(mpijob(), 3)), (200, with_active(mpijob(), 3)), (200, with_active(mpijob(), 2)))
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 2}})
    stub.route_in_turn("GET", PODS, (200, workers((0, "Running"), (1, "Running"), (2, "Running", draining))), (200, workers((0, "Running"), (1, "Running"))))
    stub.route("GET", CONFIG, 200, hosts_config(0, 1))
    client.scale_job("pi", 2, timeout=30, polling_interval=0.01)
    assert sum(r["path"] == PODS for r in stub.requests) == 2


def test_scale_job_times_out_naming_what_it_saw(stub, client):
    stub.route("GET", JOBS + "/pi", 200, with_active(mpijob(), 2))
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 3}})
    stub.route("GET", PODS, 200, workers((0, "Running"), (1, "Running"), (2, "Pending")))
    stub.route("GET", CONFIG, 404, status(404, "NotFound", 'configmaps "pi-config" not found'))
    with pytest.raises(TimeoutError) as err:
        client.scale_job("pi", 3, timeout=0.3, polling_interval=0.05)
    assert isinstance(err.value, WaitTimeoutError)
    assert str(err.value) == (
        "MPIJob ns/pi: not at 3 workers after 0.3s: the status counts 2 active, Running: pi-worker-0, pi-worker-1; discover_hosts.sh lists: none"
    )


def test_scale_job_raises_when_the_job_fails_goes_or_ends(stub, client):
    stub.route_in_turn("GET", JOBS + "/pi", (200, mpijob()), (200, mpijob(conditions=[("Failed", "True")])))
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 3}})
    with pytest.raises(JobFailedError, match="R: m Failed"):
        client.scale_job("pi", 3, timeout=30, polling_interval=0.01)
    stub.route_in_turn("GET", JOBS + "/pi", (200, mpijob()), (404, status(404, "NotFound", 'mpijobs.kubeflow.org "pi" not found')))
    with pytest.raises(NotFoundError):
        client.scale_job("pi", 3, timeout=30, polling_interval=0.01)
    stub.route_in_turn("GET", JOBS + "/pi", (200, mpijob()), (200, mpijob(conditions=[("Succeeded", "True")])))
    with pytest.raises(MPIJobError, match="succeeded while waiting for 3 workers"):
        client.scale_job("pi", 3, timeout=30, polling_interval=0.01)


def test_scale_job_without_wait_is_scale(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 3}})
    client.scale_job("pi", 3, wait=False)
    client.scale("pi", 3)
    sent = [(r["method"], r["path"], r["body"]) for r in stub.requests]
    assert sent[:3] == sent[3:] == [("GET", JOBS + "/pi", None), ("PATCH", JOBS + "/pi/scale", {"spec": {"replicas": 3}}), ("GET", JOBS + "/pi", None)]


def test_v2beta1_scale_job_reads_host_names_in_the_subdomain(stub):
    """v2beta1's discover_hosts.sh names hosts in the job's subdomain, and,
    with runLauncherAsWorker, lists the launcher, which is no worker."""
    client = v2_client()
    stub.routes.clear()
    stub.requests.clear()
    v2 = "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/pi"
    job = dict(with_active(mpijob(), 2), apiVersion="kubeflow.org/v2beta1")
    stub.route("GET", v2, 200, job)
    stub.route("PATCH", v2 + "/scale", 200, {"kind": "Scale", "spec": {"replicas": 2}})
    pods = workers((0, "Running"), (1, "Running"))
    for pod in pods["items"]:
        pod["metadata"]["labels"] = {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "worker"}
    stub.route("GET", PODS, 200, pods)
    script = "#!/bin/sh\necho pi-launcher.pi.ns.svc\necho pi-worker-0.pi.ns.svc\necho pi-worker-1.pi.ns.svc\n"
    stub.route("GET", CONFIG, 200, {"data": {"discover_hosts.sh": script}})
    client.scale_job("pi", 2, timeout=5, polling_interval=0.01)


def test_scale_in_job_names_the_workers_that_go(stub, client):
    """The named worker gets a pod-deletion-cost below the others' (one of
    which is -5 already), then the replicas go down by one."""
    stub.route_in_turn("GET", JOBS + "/pi", (200, with_active(mpijob(), 3, 3)), (200, with_active(mpijob(), 3, 3)), (200, with_active(mpijob(), 2, 2)))
    stub.route_in_turn(
        "GET",
        PODS,
        (200, workers((0, "Running"), (1, "Running", {"controller.kubernetes.io/pod-deletion-cost": "-5"}), (2, "Running"))),
        (200, workers((1, "Running"), (2, "Running"))),
    )
    stub.route("PATCH", PODS + "/pi-worker-0", 200, v1_pod("pi-worker-0", "worker", 0))
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 2}})
    stub.route("GET", CONFIG, 200, hosts_config(1, 2))
    client.scale_in_job("pi", ["pi-worker-0"], timeout=30, polling_interval=0.01)
    patches = [(r["path"], r["content_type"], r["body"]) for r in stub.requests if r["method"] == "PATCH"]
    assert patches == [
        (PODS + "/pi-worker-0", "application/strategic-merge-patch+json", {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-6"}}}),
        (JOBS + "/pi/scale", "application/merge-patch+json", {"spec": {"replicas": 2}}),
    ]


def test_scale_in_job_finds_out_when_the_operator_removed_others(stub, client):
    stub.route_in_turn("GET", JOBS + "/pi", (200, with_active(mpijob(), 3, 3)), (200, with_active(mpijob(), 3, 3)), (200, with_active(mpijob(), 2, 2)))
    stub.route_in_turn("GET", PODS, (200, workers((0, "Running"), (1, "Running"), (2, "Running"))), (200, workers((0, "Running"), (1, "Running"))))
    stub.route("PATCH", PODS + "/pi-worker-0", 200, v1_pod("pi-worker-0", "worker", 0))
    stub.route("PATCH", JOBS + "/pi/scale", 200, {"kind": "Scale", "spec": {"replicas": 2}})
    stub.route("GET", CONFIG, 200, hosts_config(0, 1))
    with pytest.raises(MPIJobError, match="the operator kept pi-worker-0 and removed others"):
        client.scale_in_job("pi", "pi-worker-0", timeout=30, polling_interval=0.01)


@pytest.mark.parametrize(
    "pods,victims,error,message",
    [
        (workers((0, "Running"), (1, "Running")), ["pi-worker-7"], ValueError, "pi-worker-7 is not a worker of MPIJob ns/pi \\(its workers: pi-worker-0, pi-worker-1\\)"),
        (
            workers((0, "Running"), (1, "Running", {"mpi-operator.kubeflow.org/draining-since": "2026-11-23T16:05:42Z"})),
            ["pi-worker-1"],
            ValueError,
            "already leaving",
        ),
        (workers((0, "Running"), (1, "Pending")), ["pi-worker-0"], MPIJobError, "pi-worker-1 of MPIJob ns/pi is Pending: the operator removes"),
        (workers((0, "Running")), ["pi-worker-0"], MPIJobError, "has 1 live workers but asks for 2"),
        (workers((0, "Running"), (1, "Running")), ["pi-worker-0", "pi-worker-1"], InvalidError, "must not be less than spec.elasticPolicy.minReplicas"),
        (workers((0, "Running"), (1, "Running")), [], ValueError, "at least one"),
    ],
)
def test_scale_in_job_refuses_before_any_change(stub, client, pods, victims, error, message):
    stub.route("GET", JOBS + "/pi", 200, mpijob())  # 2 workers, minReplicas 1
    stub.route("GET", PODS, 200, pods)
    with pytest.raises(error, match=message):
        client.scale_in_job("pi", victims, timeout=5)
    assert [r for r in stub.requests if r["method"] != "GET"] == []


def watch_events(*jobs, kind="MODIFIED"):
    return [json.dumps({"type": kind, "object": j}) + "\n" for j in jobs]


def test_wait_for_watches_from_the_jobs_resource_version(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob(resource_version="5"))
    stub.route(
        "GET",
        JOBS,
        200,
        watch_events(mpijob(conditions=[("Created", "True")], resource_version="6"), mpijob(conditions=[("Running", "True")], resource_version="7")),
    )
    job = client.wait_for("pi", ["Running"], timeout=30)
    assert job.metadata.resource_version == "7"
    watch = stub.requests[1]
    assert watch["path"] == JOBS
    assert watch["query"]["watch"] in ("true", "True")
    assert watch["query"]["fieldSelector"] == "metadata.name=pi"
    assert watch["query"]["resourceVersion"] == "5"
    assert 1 <= int(watch["query"]["timeoutSeconds"]) <= 30


def test_wait_for_reads_afresh_when_its_resource_version_is_too_old(stub, client):
    """A watch from a compacted resourceVersion gets an ERROR event 410:
    the client reads the job again and watches on from the new version."""
    stub.route_in_turn("GET", JOBS + "/pi", (200, mpijob(resource_version="5")), (200, mpijob(resource_version="90")))
    gone_event = {"type": "ERROR", "object": status(410, "Expired", "too old resource version: 5 (80)")}
    stub.route_in_turn(
        "GET",
        JOBS,
        (200, [json.dumps(gone_event) + "\n"]),
        (200, watch_events(mpijob(conditions=[("Running", "True")], resource_version="91"))),
    )
    job = client.wait_for("pi", ["Running"], timeout=30)
    assert job.metadata.resource_version == "91"
    watches = [r["query"]["resourceVersion"] for r in stub.requests if r["path"] == JOBS]
    assert watches == ["5", "90"]


def test_wait_for_raises_when_the_job_fails(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    stub.route("GET", JOBS, 200, watch_events(mpijob(conditions=[("Failed", "True")])))
    with pytest.raises(JobFailedError, match="R: m Failed") as err:
        client.wait_for("pi", ["Succeeded"], timeout=30)
    assert err.value.job.metadata.name == "pi"


def test_wait_for_an_until_predicate(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    scaled = mpijob()
    scaled["status"]["replicaStatuses"] = {"Worker": {"active": 3}}
    stub.route("GET", JOBS, 200, watch_events(mpijob(), scaled))
    job = client.wait_for("pi", until=lambda j: "Worker" in j.status.replica_statuses, timeout=30)
    assert job.status.replica_statuses["Worker"].active == 3


def test_wait_for_times_out(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob(conditions=[("Running", "True")]))
    stub.route("GET", JOBS, 200, [])  # each watch ends without events
    with pytest.raises(WaitTimeoutError) as err:
        client.wait_for("pi", ["Succeeded"], timeout=1)
    assert err.value.job.status.conditions[0].type == "Running"


def test_wait_for_a_deleted_job(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    stub.route("GET", JOBS, 200, watch_events(mpijob(), kind="DELETED"))
    with pytest.raises(NotFoundError, match="deleted") as err:
        client.wait_for("pi", timeout=30)
    assert (err.value.status, err.value.reason) == (404, "NotFound")


def test_wait_for_a_job_that_does_not_exist(stub, client):
    stub.route("GET", JOBS + "/pi", 404, status(404, "NotFound", 'mpijobs.kubeflow.org "pi" not found'))
    with pytest.raises(NotFoundError, match='"pi" not found'):
        client.wait_for("pi", timeout=30)


def test_kubeflow_names_send_the_requests_of_the_short_names(stub, client):
    stub.route("POST", JOBS, 201, mpijob())
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    stub.route("GET", JOBS, 200, {"items": [mpijob("a")]})
    stub.route("DELETE", JOBS + "/pi", 200, status(200, "", ""))
    assert client.create_job(mpijob(), job_kind="MPIJob").metadata.name == "pi"
    assert client.get_job("pi").metadata.name == "pi"
    assert [j.metadata.name for j in client.list_jobs(label_selector="team=a")] == ["a"]
    client.delete_job("pi")
    client.create(mpijob())
    client.get("pi")
    client.list(label_selector="team=a")
    client.delete("pi")
    sent = [(r["method"], r["path"], r["query"], r["body"]) for r in stub.requests]
    assert sent[:4] == sent[4:]
    assert [r[0] for r in sent[:4]] == ["POST", "GET", "GET", "DELETE"]


def test_delete_job_with_delete_options(stub, client):
    stub.route("DELETE", JOBS + "/pi", 200, status(200, "", ""))
    client.delete_job("pi", delete_options=k8s.V1DeleteOptions(propagation_policy="Background", grace_period_seconds=0))
    assert stub.requests[0]["body"] == {"propagationPolicy": "Background", "gracePeriodSeconds": 0}


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.create_job(mpijob(), job_kind="PyTorchJob"),
        lambda c: c.get_job("pi", job_kind="PyTorchJob"),
        lambda c: c.list_jobs(job_kind="TFJob"),
        lambda c: c.delete_job("pi", job_kind="TFJob"),
        lambda c: c.get_job_conditions("pi", job_kind="TFJob"),
        lambda c: c.wait_for_job_conditions("pi", job_kind="TFJob"),
    ],
)
def test_a_job_kind_other_than_mpijob_is_refused_before_any_request(stub, client, call):
    with pytest.raises(ValueError, match="serves MPIJobs"):
        call(client)
    assert stub.requests == []


def test_get_job_conditions_and_is_job(stub, client):
    conditions = [("Created", "True"), ("Running", "False"), ("Restarting", "True")]
    stub.route("GET", JOBS + "/pi", 200, mpijob(conditions=conditions))
    got = client.get_job_conditions("pi")
    assert [(c.type, c.status, c.reason) for c in got] == [(t, s, "R") for t, s in conditions]
    assert client.is_job_created("pi") and client.is_job_restarting("pi")
    assert not (client.is_job_running("pi") or client.is_job_succeeded("pi") or client.is_job_failed("pi"))
    assert len(stub.requests) == 6  # one read each

    stub.requests.clear()
    job = client.get_job("pi")
    assert client.is_job_created(job=job) and not client.is_job_running(job=job)
    assert [c.type for c in client.get_job_conditions(job=job)] == ["Created", "Running", "Restarting"]
    assert len(stub.requests) == 1  # the job given is not read again
    with pytest.raises(ValueError, match="name"):
        client.is_job_running()


def test_get_job_conditions_of_a_job_without_status(stub, client):
    job = mpijob()
    del job["status"]
    stub.route("GET", JOBS + "/pi", 200, job)
    assert client.get_job_conditions("pi") == []
    assert not client.is_job_created("pi")


def test_wait_for_job_conditions_polls_with_a_polling_interval(stub, client):
    """With a polling_interval the job is read that often, as Kubeflow's
    client does, and no watch is opened; the callback sees each read."""
    stub.route_in_turn(
        "GET",
        JOBS + "/pi",
        (200, mpijob(conditions=[("Created", "True")], resource_version="1")),
        (200, mpijob(conditions=[("Created", "True")], resource_version="2")),
        (200, mpijob(conditions=[("Created", "True"), ("Running", "True")], resource_version="3")),
    )
    seen = []
    job = client.wait_for_job_conditions("pi", expected_conditions={"Running", "Succeeded"}, timeout=30, polling_interval=0.05, callback=lambda j: seen.append(j.metadata.resource_version))
    assert job.metadata.resource_version == "3"
    assert seen == ["1", "2", "3"]
    assert [(r["method"], r["path"]) for r in stub.requests] == [("GET", JOBS + "/pi")] * 3


def test_wait_for_job_conditions_polling_times_out(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob(conditions=[("Running", "True")]))
    start = time.monotonic()
    with pytest.raises(TimeoutError) as err:
        client.wait_for_job_conditions("pi", timeout=0.5, polling_interval=0.1)
    assert 0.5 <= time.monotonic() - start < 5
    assert isinstance(err.value, WaitTimeoutError)
    assert "none of ['Succeeded'] after 0.5s" in str(err.value)
    assert err.value.job.status.conditions[0].type == "Running"


def test_wait_for_job_conditions_wait_timeout_is_kubeflows_name_for_timeout(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    start = time.monotonic()
    with pytest.raises(WaitTimeoutError):
        client.wait_for_job_conditions("pi", timeout=600, wait_timeout=0.3, polling_interval=0.1)
    assert time.monotonic() - start < 5


def test_wait_for_job_conditions_polling_a_job_that_goes(stub, client):
    stub.route_in_turn(
        "GET", JOBS + "/pi", (200, mpijob()), (404, status(404, "NotFound", 'mpijobs.kubeflow.org "pi" not found'))
    )
    with pytest.raises(NotFoundError, match='"pi" not found'):
        client.wait_for_job_conditions("pi", timeout=30, polling_interval=0.05)


@pytest.mark.parametrize("polling_interval", [None, 0.05])
def test_wait_for_job_conditions_raises_a_runtime_error_when_the_job_fails(stub, client, polling_interval):
    stub.route("GET", JOBS + "/pi", 200, mpijob(conditions=[("Failed", "True")]))
    stub.route("GET", JOBS, 200, [])
    with pytest.raises(RuntimeError, match="R: m Failed") as err:
        client.wait_for_job_conditions("pi", timeout=30, polling_interval=polling_interval)
    assert isinstance(err.value, JobFailedError)
    job = client.wait_for_job_conditions("pi", expected_conditions="Failed", timeout=30, polling_interval=polling_interval)
    assert job.metadata.name == "pi"


def test_wait_for_job_conditions_on_a_watch_calls_back_once_per_state(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob(resource_version="5"))
    stub.route(
        "GET",
        JOBS,
        200,
        watch_events(mpijob(conditions=[("Created", "True")], resource_version="6"), mpijob(conditions=[("Succeeded", "True")], resource_version="7")),
    )
    seen = []
    job = client.wait_for_job_conditions("pi", callback=lambda j: seen.append(j.metadata.resource_version), timeout=30)
    assert job.metadata.resource_version == "7"
    assert seen == ["5", "6", "7"]
    assert stub.requests[1]["query"]["watch"] in ("true", "True")


@pytest.mark.parametrize("conditions,version", [({"Runing"}, "v1"), ({"Suspended"}, "v1"), ({"Done", "Running"}, "v2beta1")])
def test_wait_for_job_conditions_refuses_a_condition_the_operator_never_writes(stub, conditions, version):
    conf = k8s.Configuration(host="http://127.0.0.1:%d" % STUB_PORT)
    client = MPIJobClient(namespace="ns", api_client=k8s.ApiClient(conf), version=version)
    stub.requests.clear()
    with pytest.raises(ValueError, match="have no condition"):
        client.wait_for_job_conditions("pi", expected_conditions=conditions)
    assert stub.requests == []


def test_status_predicates(stub, client):
    stub.route("GET", JOBS + "/pi", 200, mpijob(conditions=[("Running", "False"), ("Succeeded", "True")]))
    assert (client.is_running("pi"), client.is_succeeded("pi"), client.is_failed("pi")) == (False, True, False)


def test_get_logs_of_the_launcher(stub, client):
    stub.route("GET", "/api/v1/namespaces/ns/pods/pi-launcher/log", 200, "rank 0: hello\n")
    assert client.get_logs("pi") == "rank 0: hello\n"
    assert stub.requests[0]["query"] == {}


@pytest.mark.parametrize("worker", [3, "3", "pi-worker-3"])
def test_get_logs_of_a_worker(stub, client, worker):
    stub.route("GET", "/api/v1/namespaces/ns/pods/pi-worker-3/log", 200, "w3\n")
    assert client.get_logs("pi", worker=worker, container="worker", tail_lines=10) == "w3\n"
    assert stub.requests[0]["query"] == {"container": "worker", "tailLines": "10"}


def test_get_logs_follow_yields_lines(stub, client):
    stub.route("GET", "/api/v1/namespaces/ns/pods/pi-launcher/log", 200, ["epoch 1\nep", "och 2\n", "done"])
    assert list(client.get_logs("pi", follow=True)) == ["epoch 1", "epoch 2", "done"]
    # the kubernetes client writes Python's bool; the API server parses either
    assert stub.requests[0]["query"] in ({"follow": "true"}, {"follow": "True"})


def test_get_logs_error_carries_the_message(stub, client):
    message = "container launcher is waiting to start: ContainerCreating"
    stub.route("GET", "/api/v1/namespaces/ns/pods/pi-launcher/log", 400, status(400, "BadRequest", message))
    with pytest.raises(APIError, match=message):
        client.get_logs("pi")


def test_get_job_pods_launcher_then_workers_by_index(stub, client):
    stub.route(
        "GET",
        PODS,
        200,
        {"items": [v1_pod("pi-worker-10", "worker", 10), v1_pod("pi-launcher", "launcher"), v1_pod("pi-worker-2", "worker", 2), v1_pod("pi-worker-0", "worker", 0)]},
    )
    assert client.get_job_pod_names("pi") == ["pi-launcher", "pi-worker-0", "pi-worker-2", "pi-worker-10"]
    assert all(isinstance(p, k8s.V1Pod) for p in client.get_job_pods("pi"))
    assert client.get_job_pod_names("pi", replica_index=2) == ["pi-worker-2"]
    queries = [r["query"]["labelSelector"] for r in stub.requests]
    assert queries == ["mpi-job-name=pi", "mpi-job-name=pi", "mpi-job-name=pi,mpi-job-role=worker"]


@pytest.mark.parametrize(
    "kwargs,selector",
    [
        ({"role": "launcher"}, "mpi-job-name=pi,mpi-job-role=launcher"),
        ({"is_master": True}, "mpi-job-name=pi,mpi-job-role=launcher"),
        ({"replica_type": "Launcher"}, "mpi-job-name=pi,mpi-job-role=launcher"),
        ({"replica_type": "worker"}, "mpi-job-name=pi,mpi-job-role=worker"),
        ({"role": "worker", "replica_index": 0}, "mpi-job-name=pi,mpi-job-role=worker"),
    ],
)
def test_get_job_pods_by_role(stub, client, kwargs, selector):
    stub.route("GET", PODS, 200, {"items": [v1_pod("pi-launcher", "launcher"), v1_pod("pi-worker-0", "worker", 0)]})
    names = client.get_job_pod_names("pi", **kwargs)
    assert stub.requests[0]["query"] == {"labelSelector": selector}
    assert names == (["pi-launcher"] if "launcher" in selector else ["pi-worker-0"])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"role": "chief"}, "not 'chief'"),
        ({"role": "worker", "is_master": True}, "different pods"),
        ({"role": "launcher", "replica_type": "Worker"}, "different pods"),
        ({"is_master": True, "replica_index": 0}, "the launcher has none"),
    ],
)
def test_get_job_pods_refuses_contradictions(stub, client, kwargs, message):
    with pytest.raises(ValueError, match=message):
        client.get_job_pods("pi", **kwargs)
    assert stub.requests == []


def test_get_job_pods_of_a_job_without_pods_or_without_a_job(stub, client):
    stub.route("GET", PODS, 200, {"items": []})
    stub.route("GET", JOBS + "/pi", 200, mpijob())
    assert client.get_job_pods("pi") == []
    assert client.get_job_logs("pi") == {}
    stub.route("GET", JOBS + "/pi", 404, status(404, "NotFound", 'mpijobs.kubeflow.org "pi" not found'))
    with pytest.raises(NotFoundError, match='"pi" not found'):
        client.get_job_pods("pi")
    with pytest.raises(NotFoundError, match='"pi" not found'):
        client.get_job_logs("pi")


def test_v2beta1_get_job_pods_launcher_job_pods_newest_first(stub):
    client = v2_client()
    stub.routes.clear()
    stub.requests.clear()
    worker = {
        "metadata": {"name": "pi-worker-0", "labels": {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "worker"}},
        "spec": {"containers": [{"name": "worker"}]},
    }
    stub.route(
        "GET",
        PODS,
        200,
        {
            "items": [
                worker,
                launcher_pod("pi-launcher-old11", "2026-11-23T16:00:00Z"),
                launcher_pod("pi-launcher-stray", "2026-11-23T16:09:00Z", owner="other-launcher"),
                launcher_pod("pi-launcher-new22", "2026-11-23T16:05:00Z"),
            ]
        },
    )
    assert client.get_job_pod_names("pi") == ["pi-launcher-new22", "pi-launcher-old11", "pi-worker-0"]
    assert stub.requests[0]["query"] == {"labelSelector": "training.kubeflow.org/job-name=pi"}
    stub.route("GET", PODS + "/pi-launcher-new22/log", 200, "second try\n")
    stub.route("GET", PODS + "/pi-launcher-old11/log", 200, "first try\n")
    assert list(client.get_job_logs("pi", is_master=True).items()) == [("pi-launcher-new22", "second try\n"), ("pi-launcher-old11", "first try\n")]


def test_get_job_logs_of_every_pod(stub, client):
    """Every pod's log, keyed by pod name in get_job_pods' order; a pod of
    several containers without a default one is read in its first."""
    stub.route(
        "GET",
        PODS,
        200,
        {
            "items": [
                v1_pod("pi-worker-1", "worker", 1, containers=("worker", "sidecar")),
                v1_pod("pi-worker-0", "worker", 0, containers=("worker", "sidecar"), annotations={"kubectl.kubernetes.io/default-container": "sidecar"}),
                v1_pod("pi-launcher", "launcher"),
            ]
        },
    )
    stub.route("GET", PODS + "/pi-launcher/log", 200, "rank 0: done\n")
    stub.route("GET", PODS + "/pi-worker-0/log", 200, "sidecar 0\n")
    stub.route("GET", PODS + "/pi-worker-1/log", 200, "")
    logs = client.get_job_logs("pi", tail_lines=3)
    assert list(logs.items()) == [("pi-launcher", "rank 0: done\n"), ("pi-worker-0", "sidecar 0\n"), ("pi-worker-1", "")]
    reads = [(r["path"].split("/")[-2], r["query"]) for r in stub.requests if r["path"].endswith("/log")]
    assert reads == [
        ("pi-launcher", {"tailLines": "3"}),
        ("pi-worker-0", {"tailLines": "3"}),
        ("pi-worker-1", {"tailLines": "3", "container": "worker"}),
    ]


def test_get_job_logs_of_one_role_index_or_pod(stub, client):
    stub.route("GET", PODS, 200, {"items": [v1_pod("pi-worker-3", "worker", 3)]})
    stub.route("GET", PODS + "/pi-worker-3/log", 200, "w3\n")
    assert client.get_job_logs("pi", replica_index=3, container="worker") == {"pi-worker-3": "w3\n"}
    assert stub.requests[-1]["query"] == {"container": "worker"}
    stub.requests.clear()
    assert client.get_job_logs("pi", pod_name="pi-worker-3") == {"pi-worker-3": "w3\n"}
    assert [r["path"] for r in stub.requests] == [PODS + "/pi-worker-3/log"]  # read at once, no list
    with pytest.raises(ValueError, match="not both"):
        client.get_job_logs("pi", pod_name="pi-worker-3", role="worker")


def test_get_job_logs_follow_gives_an_iterator_per_pod(stub, client):
    stub.route("GET", PODS, 200, {"items": [v1_pod("pi-launcher", "launcher"), v1_pod("pi-worker-0", "worker", 0)]})
    stub.route("GET", PODS + "/pi-launcher/log", 200, ["epoch 1\nep", "och 2\n"])
    stub.route("GET", PODS + "/pi-worker-0/log", 200, ["ready\n"])
    logs = client.get_job_logs("pi", follow=True)
    assert list(logs) == ["pi-launcher", "pi-worker-0"]
    assert list(logs["pi-worker-0"]) == ["ready"]
    assert list(logs["pi-launcher"]) == ["epoch 1", "epoch 2"]


def test_get_job_logs_raises_what_the_api_server_answers_for_a_pod(stub, client):
    stub.route("GET", PODS, 200, {"items": [v1_pod("pi-launcher", "launcher"), v1_pod("pi-worker-0", "worker", 0)]})
    stub.route("GET", PODS + "/pi-launcher/log", 200, "ok\n")
    message = 'container "main" in pod "pi-worker-0" is waiting to start: ContainerCreating'
    stub.route("GET", PODS + "/pi-worker-0/log", 400, status(400, "BadRequest", message))
    with pytest.raises(APIError) as err:
        client.get_job_logs("pi")
    assert (err.value.status, err.value.message) == (400, message)


def test_get_workers(stub, client):
    script = "#!/bin/sh\necho pi-worker-0:1\necho pi-worker-10:1\n"
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/pi-config", 200, {"data": {"discover_hosts.sh": script}})

    def pod(name, index, phase, node=None, annotations=None):
        return {
            "metadata": {"name": name, "labels": {"replica-index": index}, "annotations": annotations},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase},
        }

    since = "2026-11-23T16:05:42.936084Z"
    stub.route(
        "GET",
        "/api/v1/namespaces/ns/pods",
        200,
        {
            "items": [
                pod("pi-worker-10", "10", "Running", "n1"),
                pod("pi-worker-2", "2", "Running", "n2", {"mpi-operator.kubeflow.org/draining-since": since}),
                pod("pi-worker-0", "0", "Running", "n1"),
                pod("pi-worker-11", "11", "Pending"),
            ]
        },
    )
    workers = client.get_workers("pi")
    assert [(w.name, w.index, w.phase, w.node, w.listed, w.draining_since is not None) for w in workers] == [
        ("pi-worker-0", 0, "Running", "n1", True, False),
        ("pi-worker-2", 2, "Running", "n2", False, True),
        ("pi-worker-10", 10, "Running", "n1", True, False),
        ("pi-worker-11", 11, "Pending", None, False, False),
    ]
    pods = [r for r in stub.requests if r["path"].endswith("/pods")]
    assert pods[0]["query"] == {"labelSelector": "mpi-job-name=pi,mpi-job-role=worker"}


def test_get_events(stub, client):
    stub.route(
        "GET",
        "/api/v1/namespaces/ns/events",
        200,
        {
            "items": [
                {"metadata": {"name": "b"}, "involvedObject": {}, "reason": "Second", "lastTimestamp": "2026-11-23T16:00:02Z"},
                {"metadata": {"name": "a"}, "involvedObject": {}, "reason": "First", "lastTimestamp": "2026-11-23T16:00:01Z"},
            ]
        },
    )
    assert [e.reason for e in client.get_events("pi")] == ["First", "Second"]
    assert stub.requests[0]["query"] == {"fieldSelector": "involvedObject.kind=MPIJob,involvedObject.name=pi"}


def test_v2beta1_client_uses_its_version_and_labels(stub):
    conf = k8s.Configuration(host="http://127.0.0.1:%d" % STUB_PORT)
    client = MPIJobClient(namespace="ns", api_client=k8s.ApiClient(conf), version="v2beta1")
    stub.routes.clear()
    stub.requests.clear()
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/pi-config", 200, {"data": {"discover_hosts.sh": "echo pi-worker-0.pi.ns.svc\n"}})
    stub.route(
        "GET",
        "/api/v1/namespaces/ns/pods",
        200,
        {"items": [{"metadata": {"name": "pi-worker-0", "labels": {"training.kubeflow.org/replica-index": "1"}}, "status": {"phase": "Running"}}]},
    )
    # The index is the name's: with the launcher as a worker, the label is
    # the index plus one.
    assert [(w.name, w.index, w.listed) for w in client.get_workers("pi")] == [("pi-worker-0", 0, True)]
    assert stub.requests[1]["query"] == {"labelSelector": "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=worker"}


def v2_client():
    conf = k8s.Configuration(host="http://127.0.0.1:%d" % STUB_PORT)
    return MPIJobClient(namespace="ns", api_client=k8s.ApiClient(conf), version="v2beta1")


def launcher_pod(name, created, owner="pi-launcher", containers=("launcher",)):
    """A v2beta1 launcher pod: labelled by the operator, controlled by the
    launcher Job (owner) as the Job controller creates it."""
    refs = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "u-" + owner, "controller": True}] if owner else None
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "launcher", "batch.kubernetes.io/job-name": "pi-launcher"},
            "ownerReferences": refs,
        },
        "spec": {"containers": [{"name": c} for c in containers]},
        "status": {"phase": "Running"},
    }


def test_v2beta1_get_logs_reads_the_launcher_jobs_newest_pod(stub):
    """v2beta1's launcher is a batch Job: its pod's name has a generated
    suffix, and a retried launcher leaves the failed pod beside the new one.
    A pod labelled as the launcher that the Job does not control is not
    it."""
    client = v2_client()
    stub.routes.clear()
    stub.requests.clear()
    stub.route(
        "GET",
        "/api/v1/namespaces/ns/pods",
        200,
        {
            "items": [
                launcher_pod("pi-launcher-old11", "2026-11-23T16:00:00Z"),
                launcher_pod("pi-launcher-new22", "2026-11-23T16:05:00Z"),
                launcher_pod("pi-launcher-stray", "2026-11-23T16:09:00Z", owner=None),
            ]
        },
    )
    stub.route("GET", "/api/v1/namespaces/ns/pods/pi-launcher-new22/log", 200, "rank 0: retried\n")
    assert client.get_logs("pi", tail_lines=5) == "rank 0: retried\n"
    assert [(r["path"], r["query"]) for r in stub.requests] == [
        ("/api/v1/namespaces/ns/pods", {"labelSelector": "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher"}),
        ("/api/v1/namespaces/ns/pods/pi-launcher-new22/log", {"tailLines": "5"}),
    ]


def test_v2beta1_get_logs_without_a_launcher_pod(stub):
    client = v2_client()
    stub.routes.clear()
    stub.requests.clear()
    stub.route("GET", "/api/v1/namespaces/ns/pods", 200, {"items": []})
    stub.route("GET", "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/pi", 200, dict(mpijob(), apiVersion="kubeflow.org/v2beta1"))
    with pytest.raises(NotFoundError, match="MPIJob ns/pi has no launcher pod"):
        client.get_logs("pi")
    stub.route("GET", "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/pi", 404, status(404, "NotFound", 'mpijobs.kubeflow.org "pi" not found'))
    with pytest.raises(NotFoundError, match='"pi" not found'):
        client.get_logs("pi")


def test_unknown_version():
    with pytest.raises(ValueError, match="v1, v2beta1"):
        MPIJobClient(namespace="ns", api_client=k8s.ApiClient(), version="v3")


def test_namespace_from_the_kubeconfig_context(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % STUB_PORT}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "team-a", "context": {"cluster": "c", "user": "u", "namespace": "a"}},
                    {"name": "plain", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "team-a",
            }
        )
    )
    assert MPIJobClient(config_file=str(path)).namespace == "a"
    assert MPIJobClient(config_file=str(path), context="plain").namespace == "default"
    assert MPIJobClient(config_file=str(path), namespace="b").namespace == "b"
    assert MPIJobClient(config_file=str(path)).api_client.configuration.host == "http://127.0.0.1:%d" % STUB_PORT
