package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

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

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(strings.NewReader(generated), &out); err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &crd); err != nil {
		t.Fatal(err)
	}
	specs := dig(crd, "spec", "versions").([]any)[0]
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
			"Launcher": replica(replicaDescriptions["Launcher"],
				map[string]any{"description": "how many", "type": "integer"}),
			"Worker": replica(replicaDescriptions["Worker"],
				map[string]any{"description": "how many", "type": "integer", "maximum": float64(kubeflow.MaxWorkers)}),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mpiReplicaSpecs schema (-want +got):\n%s", diff)
	}

	// The run policy and the elastic bounds, which come from kubeflow/common
	// or need MaxWorkers, get their bounds.
	spec := dig(specs, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	wantPolicies := map[string]any{
		"runPolicy": map[string]any{
			"description": "the run policy",
			"type":        "object",
			"properties": map[string]any{
				"cleanPodPolicy":          map[string]any{"type": "string", "enum": []any{"None", "Running", "All"}},
				"backoffLimit":            map[string]any{"type": "integer", "minimum": float64(0)},
				"activeDeadlineSeconds":   map[string]any{"type": "integer", "minimum": float64(1)},
				"ttlSecondsAfterFinished": map[string]any{"type": "integer", "minimum": float64(0)},
			},
		},
		"elasticPolicy": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"minReplicas": map[string]any{"type": "integer", "maximum": float64(kubeflow.MaxWorkers)},
				"maxReplicas": map[string]any{"type": "integer", "maximum": float64(kubeflow.MaxWorkers)},
			},
		},
	}
	for name, w := range wantPolicies {
		if diff := cmp.Diff(w, dig(spec, name)); diff != "" {
			t.Errorf("%s schema (-want +got):\n%s", name, diff)
		}
	}

	// The versions of upstream installs follow, served (their objects'
	// children name their owner through them) and deprecated.
	versions := dig(crd, "spec", "versions").([]any)
	var names []string
	for _, v := range versions {
		names = append(names, dig(v, "name").(string))
	}
	if diff := cmp.Diff([]string{"v1", "v1alpha2", "v2beta1"}, names); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	for _, v := range versions[1:] {
		name := dig(v, "name").(string)
		wantVersion := map[string]any{
			"name": name, "served": true, "storage": false, "deprecated": true,
			"deprecationWarning": "kubeflow.org/" + name + " MPIJob is served only to keep the jobs of an upstream install; " +
				"the mpi-operator of this installation runs kubeflow.org/v1 MPIJobs and leaves " + name + " ones alone",
			"subresources": map[string]any{"status": map[string]any{}},
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
		}
		if diff := cmp.Diff(wantVersion, v); diff != "" {
			t.Errorf("legacy version (-want +got):\n%s", diff)
		}
	}
}

func TestRunRejectsUnexpectedInput(t *testing.T) {
	for name, in := range map[string]string{
		"no versions":     "spec: {}\n",
		"no replica spec": "spec:\n  versions:\n  - schema:\n      openAPIV3Schema: {}\n",
		// A field that a bound is for went missing from the generated schema.
		"no run policy":      strings.Replace(generated, "runPolicy:", "otherPolicy:", 1),
		"no init containers": strings.Replace(generated, "initContainers:", "sidecars:", 1),
	} {
		if err := run(strings.NewReader(in), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
