package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// generated stands for controller-gen's output: one version, whose name
// the tests replace, with the fields crdtrim works on.
const generated = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: mpijobs.kubeflow.org
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            description: the spec
            properties:
              mpiReplicaSpecs:
                description: the replicas
                type: object
                additionalProperties:
                  description: a replica
                  type: object
                  properties:
                    replicas:
                      description: how many
                      type: integer
                    restartPolicy:
                      description: the policy
                      type: string
                    template:
                      description: the pod template
                      type: object
                      properties:
                        spec:
                          description: the pod spec
                          type: object
                          properties:
                            description:
                              description: a field named description
                              type: string
                            containers:
                              description: the containers
                              type: array
                              items:
                                type: object
                                properties:
                                  name:
                                    description: the name
                                    type: string
                            initContainers:
                              type: array
                              items:
                                type: object
                                properties:
                                  name:
                                    type: string
              runPolicy:
                description: the run policy
                type: object
                properties:
                  cleanPodPolicy:
                    type: string
                  backoffLimit:
                    type: integer
                  activeDeadlineSeconds:
                    type: integer
                  ttlSecondsAfterFinished:
                    type: integer
              elasticPolicy:
                type: object
                properties:
                  minReplicas:
                    type: integer
                  maxReplicas:
                    type: integer
`

// generatedAs returns the generated CRD with its version named version.
func generatedAs(version string) string {
	return strings.Replace(generated, "- name: v1\n", "- name: "+version+"\n", 1)
}

func TestRun(t *testing.T) {
	const maxWorkers = 1234
	cases := []struct {
		version string
		// Worker's description, from the API's replicaDescriptions.
		worker string
		// The run policy's schema after crdtrim: bounded for v1, whose
		// run policy comes from kubeflow/common, untouched for v2beta1,
		// whose types carry markers.
		runPolicy map[string]any
		legacy    []string
		warning   string // of the legacy version v9
	}{
		{
			version: "v1",
			worker:  "Worker are the pods the launcher starts MPI ranks on, through kubectl exec; replicas may be 0 to 1234.",
			runPolicy: map[string]any{
				"cleanPodPolicy":          map[string]any{"type": "string", "enum": []any{"None", "Running", "All"}},
				"backoffLimit":            map[string]any{"type": "integer", "minimum": float64(0)},
				"activeDeadlineSeconds":   map[string]any{"type": "integer", "minimum": float64(1)},
				"ttlSecondsAfterFinished": map[string]any{"type": "integer", "minimum": float64(0)},
			},
			legacy: []string{"v1alpha2", "v2beta1"},
			warning: "kubeflow.org/v9 MPIJob is served only to keep the jobs of an upstream install; " +
				"the mpi-operator of this installation runs kubeflow.org/v1 MPIJobs and leaves v9 ones alone",
		},
		{
			version: "v2beta1",
			worker:  "Worker are the pods the launcher starts MPI ranks on, over SSH; replicas may be 0 to 1234.",
			runPolicy: map[string]any{
				"cleanPodPolicy":          map[string]any{"type": "string"},
				"backoffLimit":            map[string]any{"type": "integer"},
				"activeDeadlineSeconds":   map[string]any{"type": "integer"},
				"ttlSecondsAfterFinished": map[string]any{"type": "integer"},
			},
			legacy: []string{"v1", "v1alpha2"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(strings.NewReader(generatedAs(tc.version)), &out, maxWorkers); err != nil {
				t.Fatal(err)
			}
			var crd map[string]any
			if err := yaml.Unmarshal(out.Bytes(), &crd); err != nil {
				t.Fatal(err)
			}
			checkTrimmed(t, crd, tc.version, tc.worker, tc.runPolicy)
			checkLegacyVersions(t, crd, tc.version, tc.legacy)
			if warn := apis[tc.version].legacyWarning; (warn != nil) != (tc.warning != "") || warn != nil && warn("v9") != tc.warning {
				t.Errorf("deprecation warning of v9: want %q", tc.warning)
			}
		})
	}
}

// checkTrimmed checks the schema of the API's own version: the replica
// map as two properties with bounded workers and container names, no
// descriptions in the pod templates, the run policy as runPolicy says and
// the elastic bounds at MaxWorkers.
func checkTrimmed(t *testing.T, crd map[string]any, version, worker string, runPolicy map[string]any) {
	t.Helper()
	specs := dig(crd, "spec", "versions").([]any)[0]
	if name := dig(specs, "name"); name != version {
		t.Fatalf("the first version is %v, want %s", name, version)
	}
	got := dig(specs, "schema", "openAPIV3Schema", "properties", "spec", "properties", "mpiReplicaSpecs")
	containerName := map[string]any{"type": "string", "maxLength": float64(63), "pattern": dnsLabel}
	replica := func(desc string, replicas map[string]any) map[string]any {
		return map[string]any{
			"description": desc,
			"type":        "object",
			"properties": map[string]any{
				"replicas":      replicas,
				"restartPolicy": map[string]any{"description": "the policy", "type": "string", "enum": restartPolicies},
				"template": map[string]any{
					"description": "the pod template",
					"type":        "object",
					"properties": map[string]any{
						"spec": map[string]any{
							"type": "object",
							"properties": map[string]any{
								"description": map[string]any{"type": "string"},
								"containers": map[string]any{
									"type": "array",
									"items": map[string]any{
										"type":       "object",
										"properties": map[string]any{"name": containerName},
									},
								},
								"initContainers": map[string]any{
									"type": "array",
									"items": map[string]any{
										"type":       "object",
										"properties": map[string]any{"name": containerName},
									},
								},
							},
						},
					},
				},
			},
		}
	}
	want := map[string]any{
		"description": "the replicas",
		"type":        "object",
		"properties": map[string]any{
			"Launcher": replica(apis[version].replicaDescriptions(1234)["Launcher"],
				map[string]any{"description": "how many", "type": "integer"}),
			"Worker": replica(worker,
				map[string]any{"description": "how many", "type": "integer", "maximum": float64(1234)}),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mpiReplicaSpecs schema (-want +got):\n%s", diff)
	}

	spec := dig(specs, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	wantPolicies := map[string]any{
		"runPolicy": map[string]any{
			"description": "the run policy",
			"type":        "object",
			"properties":  runPolicy,
		},
		"elasticPolicy": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"minReplicas": map[string]any{"type": "integer", "maximum": float64(1234)},
				"maxReplicas": map[string]any{"type": "integer", "maximum": float64(1234)},
			},
		},
	}
	for name, w := range wantPolicies {
		if diff := cmp.Diff(w, dig(spec, name)); diff != "" {
			t.Errorf("%s schema (-want +got):\n%s", name, diff)
		}
	}
}

// checkLegacyVersions checks that the versions of other installs follow
// the API's own: for v1 served (their objects' children name their owner
// through them), deprecated and read-only, for v2beta1 not served.
func checkLegacyVersions(t *testing.T, crd map[string]any, version string, legacy []string) {
	t.Helper()
	versions := dig(crd, "spec", "versions").([]any)
	var names []string
	for _, v := range versions {
		names = append(names, dig(v, "name").(string))
	}
	if diff := cmp.Diff(append([]string{version}, legacy...), names); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	for _, v := range versions[1:] {
		name := dig(v, "name").(string)
		served := apis[version].legacyWarning != nil
		wantVersion := map[string]any{
			"name": name, "served": served, "storage": false,
			"subresources": map[string]any{"status": map[string]any{}},
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
		}
		if served {
			wantVersion["deprecated"] = true
			wantVersion["deprecationWarning"] = apis[version].legacyWarning(name)
			message := func(what string) string {
				return "kubeflow.org/" + name + " MPIJobs are read-only in this installation: " + what + " MPIJobs through kubeflow.org/v1"
			}
			unchanged := func(field string) map[string]any {
				return map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
					"x-kubernetes-validations": []any{map[string]any{"rule": "self == oldSelf", "message": message("write the " + field + " of")}},
				}
			}
			schema := wantVersion["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
			schema["properties"] = map[string]any{"spec": unchanged("spec"), "status": unchanged("status")}
			schema["x-kubernetes-validations"] = []any{map[string]any{
				"rule": "oldSelf.hasValue()", "optionalOldSelf": true, "message": message("create"),
			}}
		}
		if diff := cmp.Diff(wantVersion, v); diff != "" {
			t.Errorf("legacy version (-want +got):\n%s", diff)
		}
	}
}

func TestRunRejectsUnexpectedInput(t *testing.T) {
	for name, in := range map[string]string{
		"no versions":     "spec: {}\n",
		"no replica spec": "spec:\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema: {}\n",
		"unknown version": generatedAs("v3"),
		"two versions":    strings.Replace(generated, "  versions:\n", "  versions:\n  - name: v1alpha1\n", 1),
		// A field that a bound is for went missing from the generated schema.
		"no run policy":      strings.Replace(generated, "runPolicy:", "otherPolicy:", 1),
		"no init containers": strings.Replace(generatedAs("v2beta1"), "initContainers:", "sidecars:", 1),
		"no elastic policy":  strings.Replace(generatedAs("v2beta1"), "elasticPolicy:", "otherPolicy:", 1),
	} {
		if err := run(strings.NewReader(in), &bytes.Buffer{}, 10); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestReadMaxWorkers evaluates the limits.go files of this repository and
// small sources of each kind that must be refused.
func TestReadMaxWorkers(t *testing.T) {
	src, err := os.ReadFile("../../pkg/apis/kubeflow/v1/limits.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readMaxWorkers("limits.go", src)
	if err != nil || got != int64(kubeflow.MaxWorkers) {
		t.Errorf("v1 limits.go: MaxWorkers %d, %v; want %d", got, err, kubeflow.MaxWorkers)
	}
	// The v2 module's, whose package this module cannot import; its own
	// tests check the CRD against its MaxWorkers.
	if src, err = os.ReadFile("../../v2/pkg/apis/kubeflow/v2beta1/limits.go"); err != nil {
		t.Fatal(err)
	}
	if got, err := readMaxWorkers("limits.go", src); err != nil || got < 1 {
		t.Errorf("v2beta1 limits.go: MaxWorkers %d, %v", got, err)
	}

	for name, src := range map[string]string{
		"arithmetic":  "package p\nconst a = len(\"abc\")\nconst MaxWorkers = int32(a * 1000 / 3)\n",
		"bad syntax":  "package p\nconst MaxWorkers = \n",
		"an import":   "package p\nimport \"math\"\nconst MaxWorkers = math.MaxInt8\n",
		"no constant": "package p\nvar MaxWorkers = 5\n",
		"zero":        "package p\nconst MaxWorkers = 0\n",
		"fraction":    "package p\nconst MaxWorkers = 2.5\n",
	} {
		got, err := readMaxWorkers(name+".go", []byte(src))
		if name == "arithmetic" {
			if err != nil || got != 1000 {
				t.Errorf("%s: %d, %v; want 1000", name, got, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: MaxWorkers %d, want an error", name, got)
		}
	}
}
