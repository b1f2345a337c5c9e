package v1

import "testing"

// TestMaxWorkers pins the figures that the documentation states: the
// descriptions of elasticPolicy's bounds in types.go and
// docs/validation.md give the bound and its derivation in numbers.
func TestMaxWorkers(t *testing.T) {
	if hostfileLine != 99 || discoverLine != 98 {
		t.Errorf("a worker takes %d + %d bytes of the ConfigMap, the documentation says 99 + 98", hostfileLine, discoverLine)
	}
	if workersPerConfigMap != 5317 {
		t.Errorf("the ConfigMap holds %d workers, the documentation says 5317", workersPerConfigMap)
	}
	if MaxWorkers != 5000 {
		t.Errorf("MaxWorkers is %d, the documentation says 5000", MaxWorkers)
	}
}
