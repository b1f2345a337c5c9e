package v2beta1

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// crdPath is the CRD that hack/update-codegen.sh generates from these types.
const crdPath = "../../../../manifests/base/crd.yaml"

// at walks a decoded YAML document along keys; a number picks a list item.
func at(t *testing.T, node any, path ...any) any {
	t.Helper()
	for i, step := range path {
		switch k := step.(type) {
		case string:
			m, ok := node.(map[string]any)
			if !ok {
				t.Fatalf("no map at %v", path[:i])
			}
			node = m[k]
		case int:
			l, ok := node.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("no item %d at %v", k, path[:i])
			}
			node = l[k]
		}
	}
	return node
}

// TestCRD checks what the CRD must hold beyond what the markers say: the
// bounds hack/crdtrim writes from MaxWorkers, the versions other installs
// stored jobs in, and a size that a client-side kubectl apply accepts.
func TestCRD(t *testing.T) {
	data, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}

	// kubectl apply keeps the whole object, as JSON, in an annotation of
	// at most 256 KiB; leave room for the annotation's own growth.
	compact, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if len(compact) > 200<<10 {
		t.Errorf("the CRD takes %d bytes as JSON: too close to the 262144 of the last-applied annotation", len(compact))
	}

	type version struct {
		Name       string `json:"name"`
		Served     bool   `json:"served"`
		Storage    bool   `json:"storage"`
		Deprecated bool   `json:"deprecated"`
	}
	var versions []version
	raw, _ := json.Marshal(at(t, crd, "spec", "versions"))
	if err := json.Unmarshal(raw, &versions); err != nil {
		t.Fatal(err)
	}
	want := []version{
		{Name: GroupVersion, Served: true, Storage: true},
		{Name: "v1"},
		{Name: "v1alpha2"},
	}
	if diff := cmp.Diff(want, versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}

	schema := at(t, crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	replicas := at(t, schema, "mpiReplicaSpecs", "properties")
	for _, path := range [][]any{
		{"elasticPolicy", "properties", "minReplicas"},
		{"elasticPolicy", "properties", "maxReplicas"},
		{"mpiReplicaSpecs", "properties", "Worker", "properties", "replicas"},
	} {
		if got := at(t, schema, append(path, "maximum")...); got != float64(MaxWorkers) {
			t.Errorf("spec.%v: maximum %v, want MaxWorkers (%d)", path, got, MaxWorkers)
		}
	}
	for _, rt := range []string{"Launcher", "Worker"} {
		template := at(t, replicas, rt, "properties", "template", "properties")
		for _, field := range []string{"labels", "annotations"} {
			if at(t, template, "metadata", "properties", field) == nil {
				t.Errorf("%s: the template's metadata.%s is not in the schema: the API server would prune it", rt, field)
			}
		}
		for _, list := range []string{"containers", "initContainers"} {
			name := at(t, template, "spec", "properties", list, "items", "properties", "name")
			if at(t, name, "maxLength") != float64(63) || at(t, name, "pattern") == nil {
				t.Errorf("%s: %s[].name is not bounded as a DNS label: %v", rt, list, name)
			}
		}
		if strings.Contains(string(mustJSON(t, at(t, template, "spec"))), `"description"`+":") {
			t.Errorf("%s: the pod template still carries core/v1's descriptions", rt)
		}
	}

	scale := at(t, crd, "spec", "versions", 0, "subresources", "scale")
	wantScale := map[string]any{
		"specReplicasPath":   ".spec.mpiReplicaSpecs.Worker.replicas",
		"statusReplicasPath": ".status.replicaStatuses.Worker.active",
		"labelSelectorPath":  ".status.replicaStatuses.Worker.selector",
	}
	if diff := cmp.Diff(wantScale, scale); diff != "" {
		t.Errorf("scale subresource (-want +got):\n%s", diff)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
