package plugin

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// goldenDir holds requests and the jobs that both the plugin and the
// Python SDK must build of them (sdk/python/tests/unit/test_job_defaults.py
// holds the SDK to the same files).
var goldenDir = filepath.Join("..", "jobdefaults", "testdata")

// goldenRequest is a <case>.request.json: what a user asks for, in the
// words both builders take. Env is a list: its order is the containers'.
type goldenRequest struct {
	Name        string            `json:"name"`
	Image       string            `json:"image"`
	Workers     int32             `json:"workers"`
	MinWorkers  int32             `json:"minWorkers"`
	MaxWorkers  int32             `json:"maxWorkers"`
	GPUs        int64             `json:"gpus"`
	Command     []string          `json:"command"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Env         []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

// TestBuildMatchesGoldenJobs: submit builds of each request the golden job
// <case>.<version>.yaml, in both versions.
func TestBuildMatchesGoldenJobs(t *testing.T) {
	requests, err := filepath.Glob(filepath.Join(goldenDir, "*.request.json"))
	if err != nil || len(requests) == 0 {
		t.Fatalf("no requests in %s: %v", goldenDir, err)
	}
	for _, path := range requests {
		name := strings.TrimSuffix(filepath.Base(path), ".request.json")
		req := readGoldenRequest(t, path)
		for _, api := range apis {
			t.Run(name+"/"+api.Version, func(t *testing.T) {
				job, err := buildObject(api, req)
				if err != nil {
					t.Fatal(err)
				}
				want := readGolden(t, filepath.Join(goldenDir, name+"."+api.Version+".yaml"))
				if diff := cmp.Diff(want, pruned(t, job.Object)); diff != "" {
					t.Errorf("the %s job of %s (-golden +built):\n%s", api.Version, path, diff)
				}
			})
		}
	}
}

func readGoldenRequest(t *testing.T, path string) JobRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenRequest
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// As the flags give them: --env in order, --label and --annotation
	// in any (here sorted).
	var pod PodOptions
	for _, e := range g.Env {
		pod.Env = append(pod.Env, e.Name+"="+e.Value)
	}
	pod.Labels, pod.Annotations = flagItems(g.Labels), flagItems(g.Annotations)
	return JobRequest{Name: g.Name, Image: g.Image, Workers: g.Workers, MinWorkers: g.MinWorkers,
		MaxWorkers: g.MaxWorkers, GPUs: g.GPUs, Command: g.Command, PodOptions: pod}
}

// flagItems are a map's KEY=VALUE items, sorted by key.
func flagItems(m map[string]string) []string {
	var items []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, k+"="+m[k])
	}
	return items
}

// readGolden reads a golden job as pruned JSON.
func readGolden(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pruned(t, v)
}

// pruned is a JSON value through a JSON round trip, without nulls and empty
// objects and lists, which the API server drops alike (such as a
// template's null creationTimestamp).
func pruned(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return prune(out)
}

func prune(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, item := range v {
			if item = prune(item); item != nil {
				out[k] = item
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(v) == 0 {
			return nil
		}
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = prune(item)
		}
		return out
	}
	return v
}
