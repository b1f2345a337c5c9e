"""What an elastic job's workers look like from outside: the hosts of its
discover_hosts.sh and the state of its worker pods."""

import dataclasses
import datetime
import re
import shlex
from typing import List, Optional

# One host line of discover_hosts.sh: `echo <host>` (v2beta1, whose
# horovodrun gets the slots from --slots-per-host) or `echo <host>:<slots>`
# (v1).
_ECHO = re.compile(r"^echo\s+(.+)$")


@dataclasses.dataclass(frozen=True)
class Host:
    """A host of discover_hosts.sh.

    Attributes:
        name: the host name: a pod name (v1), or the pod's name in the job's
            DNS subdomain (v2beta1).
        slots: the slots the script gives it; None when it gives none.
    """

    name: str
    slots: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Worker:
    """A worker pod of a job.

    Attributes:
        name: the pod's name.
        index: its replica index; None when neither label nor name tells it.
        phase: the pod's phase (Pending, Running, Succeeded, Failed).
        node: the node it is bound to; None before scheduling.
        listed: whether discover_hosts.sh lists it, that is whether Horovod
            may place ranks on it.
        draining_since: when the operator chose it for removal (it has left
            the script and is deleted after the job's drainSeconds); None
            for a worker that stays.
    """

    name: str
    index: Optional[int]
    phase: Optional[str]
    node: Optional[str]
    listed: bool
    draining_since: Optional[datetime.datetime] = None


def parse_discover_hosts(script: str) -> List[Host]:
    """The hosts that a discover_hosts.sh prints, in its order. Lines other
    than `echo` (the shebang, comments, blank lines) are skipped; a line
    that echoes something other than a host is a ValueError."""
    hosts = []
    for number, line in enumerate(script.splitlines(), 1):
        match = _ECHO.match(line.strip())
        if not match:
            continue
        words = shlex.split(match.group(1))
        if len(words) != 1:
            raise ValueError("discover_hosts.sh line %d: expected one host, got %r" % (number, line))
        host, sep, slots = words[0].rpartition(":")
        if not sep:
            hosts.append(Host(name=words[0]))
        elif host and slots.isdigit():
            hosts.append(Host(name=host, slots=int(slots)))
        else:
            raise ValueError("discover_hosts.sh line %d: expected host or host:slots, got %r" % (number, line))
    return hosts


def parse_time(value: Optional[str]) -> Optional[datetime.datetime]:
    """An RFC 3339 time as the operator writes it; None for none."""
    if not value:
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
