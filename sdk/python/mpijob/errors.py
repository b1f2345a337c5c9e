"""Exceptions of the SDK. Those that come from the API server carry its
message, reason and HTTP status."""

import json
from typing import Optional

from kubernetes.client.exceptions import ApiException


class MPIJobError(Exception):
    """Base of the SDK's errors."""


class APIError(MPIJobError):
    """The API server refused a request.

    Attributes:
        status: the HTTP status code (404, 409, 422, ...).
        reason: the Status reason (NotFound, AlreadyExists, Invalid, ...).
        message: the API server's message, as kubectl would print it.
    """

    def __init__(self, message: str, status: Optional[int] = None, reason: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason

    @classmethod
    def from_api_exception(cls, exc: ApiException) -> "APIError":
        """The error for a failed call of the kubernetes client: the
        Status object's message when the body holds one. A NotFoundError
        for HTTP 404, ConflictError for 409, InvalidError for 422, else an
        APIError."""
        message, reason = None, exc.reason
        try:
            body = json.loads(exc.body) if exc.body else {}
        except (TypeError, ValueError):
            body = {}
        if isinstance(body, dict):
            message = body.get("message")
            reason = body.get("reason") or reason
        if not message:
            message = "%s %s" % (exc.status, exc.reason)
        sub = {404: NotFoundError, 409: ConflictError, 422: InvalidError}.get(exc.status, APIError)
        return sub(message, status=exc.status, reason=reason)


class NotFoundError(APIError):
    """The object does not exist (HTTP 404)."""


class ConflictError(APIError):
    """The object exists already, or changed under the request (HTTP 409)."""


class InvalidError(APIError):
    """The object breaks the CRD's schema or admission rules (HTTP 422), or
    a check the client makes with the same rules before sending it."""


class JobFailedError(MPIJobError, RuntimeError):
    """A job that a wait (wait_for_job_conditions, scale_job) waited on
    failed: its Failed condition turned True. A RuntimeError, as Kubeflow's
    TrainingClient raises for a failed job; ``job`` is the failed job."""

    def __init__(self, message: str, job):
        super().__init__(message)
        self.job = job


class WaitTimeoutError(MPIJobError, TimeoutError):
    """A wait (wait_for_job_conditions, scale_job) reached its timeout;
    ``job`` is the last state of the job seen."""

    def __init__(self, message: str, job):
        super().__init__(message)
        self.job = job
