"""The defaults of the elastic Horovod jobs that elastic_horovod_job builds,
read from job-defaults.json: the same file (a copy kept equal by ``make
generate``) from which ``kubectl mpijob submit`` takes its own, so that both
build the same job of the same request. docs/job-defaults.md describes
them."""

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

_FILE = Path(__file__).with_name("job-defaults.json")


def load() -> Dict[str, Any]:
    """job-defaults.json as a dict, each call its own."""
    with open(_FILE, encoding="utf-8") as f:
        return json.load(f)


_DEFAULTS = load()

#: The launcher's and the workers' container names.
LAUNCHER_CONTAINER: str = _DEFAULTS["containers"]["launcher"]
WORKER_CONTAINER: str = _DEFAULTS["containers"]["worker"]
#: The job's cleanPodPolicy (spec.cleanPodPolicy in v1,
#: spec.runPolicy.cleanPodPolicy in v2beta1).
CLEAN_POD_POLICY: str = _DEFAULTS["cleanPodPolicy"]
#: The elastic policy's minReplicas and drainSeconds when not given;
#: maxReplicas defaults to the workers the job starts with.
MIN_REPLICAS: int = _DEFAULTS["elasticPolicy"]["minReplicas"]
DRAIN_SECONDS: int = _DEFAULTS["elasticPolicy"]["drainSeconds"]
#: The resource a worker's GPUs are a limit of.
GPU_RESOURCE: str = _DEFAULTS["gpuResource"]
#: The discovery script the operator mounts into the launcher.
DISCOVERY_SCRIPT: str = _DEFAULTS["horovodrun"]["hostDiscoveryScript"]
#: horovodrun's --blacklist-cooldown-range, lowest and highest seconds.
BLACKLIST_COOLDOWN: Tuple[int, ...] = tuple(_DEFAULTS["horovodrun"]["blacklistCooldownRange"])
#: The command and arguments of a v2beta1 worker: sshd in the foreground.
V2BETA1_WORKER_COMMAND: List[str] = list(_DEFAULTS["v2beta1Worker"]["command"])
V2BETA1_WORKER_ARGS: List[str] = list(_DEFAULTS["v2beta1Worker"]["args"])
