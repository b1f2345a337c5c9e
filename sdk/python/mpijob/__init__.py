"""Python SDK for MPIJobs (kubeflow.org/v1 and v2beta1) on the official
Kubernetes client: generated models, MPIJobClient, and a builder of
elastic Horovod jobs."""

from . import job_defaults, models
from .client import MPIJobClient, check_replicas, condition_true, load_job_file
from .errors import APIError, ConflictError, InvalidError, JobFailedError, MPIJobError, NotFoundError, WaitTimeoutError
from .horovod import elastic_horovod_job, horovodrun_command
from .hosts import Host, Worker, parse_discover_hosts

__version__ = "0.1.0"

__all__ = [
    "APIError",
    "ConflictError",
    "Host",
    "InvalidError",
    "JobFailedError",
    "MPIJobClient",
    "MPIJobError",
    "NotFoundError",
    "WaitTimeoutError",
    "Worker",
    "check_replicas",
    "condition_true",
    "elastic_horovod_job",
    "horovodrun_command",
    "job_defaults",
    "load_job_file",
    "models",
    "parse_discover_hosts",
]
