package v2beta1

import (
	"fmt"
	"strings"
	"testing"
)

// TestMaxWorkersFigures pins the figures that the documentation states.
func TestMaxWorkersFigures(t *testing.T) {
	if hostfileLine != 485 || discoverLine != 473 {
		t.Errorf("a worker takes %d + %d bytes of the ConfigMap, the documentation says 485 + 473", hostfileLine, discoverLine)
	}
	if workersPerConfigMap != 1093 {
		t.Errorf("the ConfigMap holds %d workers, the documentation says 1093", workersPerConfigMap)
	}
	if MaxWorkers != 1000 {
		t.Errorf("MaxWorkers is %d, the documentation says 1000", MaxWorkers)
	}
}

// TestConfigMapAtMaxWorkers writes, as plain strings, the longest hostfile
// and discover_hosts.sh of a job of MaxWorkers workers, in every format,
// and checks that the ConfigMap's data stays within the API server's
// limit. It does not use the arithmetic of limits.go, so that a mistake
// there shows here.
func TestConfigMapAtMaxWorkers(t *testing.T) {
	job := strings.Repeat("j", 63)
	namespace := strings.Repeat("n", 63)
	// A DNS name of 253 characters: labels of 63 joined by dots.
	label := strings.Repeat("d", 63)
	domain := strings.Join([]string{label, label, label, label[:61]}, ".")
	if len(domain) != MaxClusterDomain {
		t.Fatalf("the test's cluster domain has %d characters, want %d", len(domain), MaxClusterDomain)
	}
	const slots = 2147483647
	suffix := "." + job + "." + namespace + ".svc." + domain
	launcher := job + "-launcher" + suffix

	formats := map[string]func(host string) string{
		"OpenMPI":     func(host string) string { return fmt.Sprintf("%s slots=%d\n", host, slots) },
		"Intel/MPICH": func(host string) string { return fmt.Sprintf("%s:%d\n", host, slots) },
	}
	for name, line := range formats {
		var hostfile, discover strings.Builder
		discover.WriteString("#!/bin/sh\n")
		// runLauncherAsWorker lists the launcher first.
		hostfile.WriteString(line(launcher))
		discover.WriteString("echo " + launcher + "\n")
		for i := range int(MaxWorkers) {
			// Indices of 10 digits, as an elastic job's may become.
			host := fmt.Sprintf("%s-worker-%d%s", job, 1000000000+i, suffix)
			hostfile.WriteString(line(host))
			discover.WriteString("echo " + host + "\n")
		}
		size := len("hostfile") + hostfile.Len() + len("discover_hosts.sh") + discover.Len()
		if size > 1<<20 {
			t.Errorf("%s: the ConfigMap of %d workers holds %d bytes, more than 1 MiB", name, MaxWorkers, size)
		}
		t.Logf("%s: %d workers take %d bytes of the ConfigMap's 1048576", name, MaxWorkers, size)
	}
}
