#!/usr/bin/env python3
"""An elastic Horovod MPIJob driven from Python: create it, wait until it
runs, scale it out and in, and watch its hosts and workers follow.

  python3 examples/sdk/elastic_horovod.py [--namespace NS] [--keep]

It uses the current kubeconfig ($KUBECONFIG or ~/.kube/config) and needs
the mpijob package (sdk/python; see docs/sdk.md)."""

import argparse
import time

from mpijob import MPIJobClient, elastic_horovod_job

NAME = "mnist-elastic"


def show(client, title):
    print("== " + title)
    print("   hosts:   " + " ".join("%s:%s" % (h.name, h.slots) for h in client.get_hosts(NAME)))
    for w in client.get_workers(NAME):
        state = "draining since %s" % w.draining_since.strftime("%H:%M:%S") if w.draining_since else "listed" if w.listed else "not listed"
        print("   worker:  %-22s %-8s %-12s %s" % (w.name, w.phase, w.node or "-", state))


def settle(check, timeout):
    """Polls check() until it holds: hosts and drain marks live in the
    ConfigMap and on the pods, which a watch of the job does not see."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("still not settled after %gs" % timeout)
        time.sleep(0.2)


def shrunk(client, n):
    """The hosts are down to n and every unlisted worker carries its drain mark."""
    workers = client.get_workers(NAME)
    return len(client.get_hosts(NAME)) == n and all(w.listed or w.draining_since for w in workers)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", help="the job's namespace (default: the kubeconfig's)")
    parser.add_argument("--keep", action="store_true", help="leave the job behind")
    args = parser.parse_args()
    client = MPIJobClient(namespace=args.namespace)

    job = elastic_horovod_job(
        NAME,
        image="horovod/horovod:0.28.1",
        command=["python", "/horovod/examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py"],
        initial_workers=2,
        min_workers=1,
        max_workers=4,
        resources={"cpu": 1, "memory": "2Gi"},
        drain_seconds=10,
    )
    print("launcher: " + " ".join(job.spec.mpi_replica_specs.launcher.template.spec.containers[0].command))
    client.create_job(job)
    start = time.monotonic()
    client.wait_for_job_conditions(NAME, expected_conditions={"Running"}, timeout=120)
    client.wait_for_workers(NAME, 2, timeout=120)
    show(client, "running after %.1f s" % (time.monotonic() - start))

    start = time.monotonic()
    client.scale_job(NAME, 4, timeout=120)  # returns once 4 workers run and are listed
    show(client, "scaled to 4 in %.1f s" % (time.monotonic() - start))

    client.scale_job(NAME, 1, wait=False)  # waiting would also wait out the drain
    settle(lambda: shrunk(client, 1), timeout=120)
    show(client, "scaled to 1: the others leave the hosts at once and drain for 10 s")

    try:
        client.scale_job(NAME, 5)
    except Exception as err:  # pylint: disable=broad-except
        print("== scale to 5: %s: %s" % (type(err).__name__, err))

    print("== events")
    for event in client.get_events(NAME):
        print("   %-8s %-18s %s" % (event.type, event.reason, event.message))
    if not args.keep:
        client.delete_job(NAME)
        print("== deleted")


if __name__ == "__main__":
    main()
