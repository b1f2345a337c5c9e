package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// An error line of the operator is explained by a fault the harness
// injected when it falls in the fault's window and says what that fault
// causes. A SIGKILL ends a process without a word, so it explains nothing;
// what an API server restart causes is the connection failing, the leader
// losing its Lease, and for a moment 403s: the new API server answers
// before its RBAC authorizer has read the Roles and bindings (seen here
// a second or so before /readyz said ok).
var outageSigns = []string{
	"is forbidden: User",
	"connection refused",
	"connection reset",
	"broken pipe",
	"EOF",
	"http2:",
	"i/o timeout",
	"context deadline exceeded",
	"Client.Timeout",
	"net/http: request canceled",
	"the server is currently unable to handle the request",
	"apiserver is shutting down",
	"the server was unable to return a response",
	"error retrieving resource lock",
	"Failed to update lock",
	"failed to renew lease",
	"Lost the leader lease",
	"Failed to watch",
}

// twoReplicas explains the one error line that running two replicas
// causes by itself: both start at once, find no Lease, and both create it;
// client-go logs the loser's AlreadyExists and reads the Lease next time.
const twoReplicas = "both replicas creating the Lease at the start"

// outageGrace is how long after /readyz answers again errors of the outage
// may still be logged: a request sent during the outage may time out
// later, and a reflector retries with a backoff.
const outageGrace = 30 * time.Second

// logGroup is the lines of one kind: one message, numbers masked.
type logGroup struct {
	severity, msg string
	count         int
	first         time.Time
	// explained is the fault that explains the lines, or "".
	explained string
}

// logReport is what the operators' logs say, every run together.
type logReport struct {
	runs                          int
	errors, warnings, unexplained int
	// shutdownErrors are error lines written after the final SIGTERM.
	shutdownErrors int
	panics         []string
	groups         []*logGroup
	// unexplainedSamples are the first unexplained lines, with their run.
	unexplainedSamples []string
}

var numbers = regexp.MustCompile(`[0-9]+`)

// explain names the fault that explains an error line, or returns "".
func explain(l harness.LogLine, restarts []harness.APIServerRestart) string {
	if strings.Contains(l.Msg, `"Error initially creating lease lock"`) && strings.Contains(l.Msg, "already exists") {
		return twoReplicas
	}
	if strings.Contains(l.Msg, refusalMessage) {
		return "ConfigMap updates refused"
	}
	for i, r := range restarts {
		end := r.Ready
		if end.IsZero() {
			end = time.Now()
		}
		if l.At.Before(r.Stopping.Add(-time.Second)) || l.At.After(end.Add(outageGrace)) {
			continue
		}
		for _, s := range outageSigns {
			if strings.Contains(l.Msg, s) {
				return fmt.Sprintf("API server restart %d", i+1)
			}
		}
	}
	return ""
}

// logSource is the log of one operator process.
type logSource struct {
	name string
	log  harness.LogSummary
}

func classifyLogs(sources []logSource, restarts []harness.APIServerRestart) logReport {
	rep := logReport{runs: len(sources)}
	groups := map[string]*logGroup{}
	for _, src := range sources {
		r, s := src.name, src.log
		rep.warnings += s.Warnings
		rep.shutdownErrors += s.ShutdownErrors
		for _, l := range s.Lines {
			if l.Severity == "panic" {
				rep.panics = append(rep.panics, fmt.Sprintf("%s: %s", r, l.Msg))
				continue
			}
			if l.Severity == "W" || l.AfterStop {
				continue
			}
			rep.errors++
			why := explain(l, restarts)
			if why == "" {
				rep.unexplained++
				if len(rep.unexplainedSamples) < 10 {
					rep.unexplainedSamples = append(rep.unexplainedSamples, fmt.Sprintf("%s, %s: %s", r, l.At.Format("15:04:05.000"), l.Msg))
				}
			}
			msg := l.Msg
			if len(msg) > 220 {
				msg = msg[:220] + "..."
			}
			key := l.Severity + why + numbers.ReplaceAllString(msg, "#")
			g := groups[key]
			if g == nil {
				g = &logGroup{severity: l.Severity, msg: msg, first: l.At, explained: why}
				groups[key] = g
			}
			g.count++
		}
	}
	for _, g := range groups {
		rep.groups = append(rep.groups, g)
	}
	slices.SortFunc(rep.groups, func(a, b *logGroup) int { return a.first.Compare(b.first) })
	return rep
}
