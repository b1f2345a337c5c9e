package controller

import (
	"strings"
)

// jobOfWorkerName is the name of the job whose worker would be called pod,
// if any job's would.
func jobOfWorkerName(pod string) (string, bool) {
	at := strings.LastIndex(pod, workerInfix)
	if at <= 0 {
		return "", false
	}
	if _, ok := parseIndex(pod[at+len(workerInfix):]); !ok {
		return "", false
	}
	return pod[:at], true
}
