package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
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
	replica := func(desc string) map[string]any {
		return map[string]any{
			"description": desc,
			"type":        "object",
			"properties": map[string]any{
				"replicas":      map[string]any{"description": "how many", "type": "integer"},
				"restartPolicy": map[string]any{"description": "the policy", "type": "string", "enum": restartPolicies},
				"template": map[string]any{
					"description": "the pod template",
					"type":        "object",
					"properties": map[string]any{
						"spec": map[string]any{
							"type": "object",
							"properties": map[string]any{
								"description": map[string]any{"type": "string"},
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
			"Launcher": replica(replicaDescriptions["Launcher"]),
			"Worker":   replica(replicaDescriptions["Worker"]),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mpiReplicaSpecs schema (-want +got):\n%s", diff)
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
	} {
		if err := run(strings.NewReader(in), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
