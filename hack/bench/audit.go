package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// The API server writes one audit event per request of the operator's
// ServiceAccount (the policy below logs nobody else) once the response is
// complete. Counting them is how the bench knows how many requests the
// operator made, whatever client code made them.

// auditPolicy logs request metadata for one user and nothing for anybody
// else, at the ResponseComplete stage only, so every request is one line.
func auditPolicy(user string) string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
    users: [%q]
  - level: None
`, user)
}

// auditEvent holds the fields of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// resource is "pods", "pods/exec", "mpijobs/status", or "-" for a request
// outside any resource (discovery).
func (e *auditEvent) resource() string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		return "-"
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

func isWriteVerb(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// readAudit returns the ResponseComplete events of user in the log file.
// A line cut short at the end of the file (being written) is skipped.
func readAudit(path, user string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			continue
		}
		if e.User.Username != user || e.Stage != "ResponseComplete" {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// requestCount counts requests by verb and resource in a time window.
type requestCount struct {
	// writes and reads by "verb resource".
	writes, reads map[string]int
	// leaseWrites are the writes to Leases (leader election), which are
	// not in writes.
	leaseWrites int
	// failed counts requests answered with a status of 400 or more, by
	// "verb resource code".
	failed map[string]int
}

// countRequests counts the events received in [from, to).
func countRequests(events []auditEvent, from, to time.Time) requestCount {
	c := requestCount{writes: map[string]int{}, reads: map[string]int{}, failed: map[string]int{}}
	for i := range events {
		e := &events[i]
		t := e.RequestReceivedTimestamp
		if t.Before(from) || !t.Before(to) {
			continue
		}
		key := e.Verb + " " + e.resource()
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 {
			c.failed[fmt.Sprintf("%s %d", key, e.ResponseStatus.Code)]++
		}
		switch {
		case isWriteVerb(e.Verb) && e.resource() == "leases":
			c.leaseWrites++
		case isWriteVerb(e.Verb):
			c.writes[key]++
		default:
			c.reads[key]++
		}
	}
	return c
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// breakdown prints "12 (8 patch pods, 4 update configmaps)", or "0".
func breakdown(m map[string]int) string {
	n := total(m)
	if n == 0 {
		return "0"
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}
