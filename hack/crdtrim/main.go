// Command crdtrim reads the generated MPIJob CRD on standard input and writes
// it back without the descriptions inside the pod templates. Those come from
// core/v1 and make up most of the file; the descriptions of the MPIJob's own
// fields stay, so that kubectl explain still documents them.
package main

import (
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crdtrim:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("no spec.versions in the input")
	}
	for _, v := range versions {
		template, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties",
			"mpiReplicaSpecs", "additionalProperties", "properties", "template").(map[string]any)
		if !ok {
			return fmt.Errorf("no pod template schema under spec.mpiReplicaSpecs")
		}
		for _, child := range []string{"properties", "items", "additionalProperties"} {
			if c, ok := template[child]; ok {
				stripDescriptions(c)
			}
		}
	}
	trimmed, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	_, err = out.Write(append([]byte("---\n"), trimmed...))
	return err
}

// dig walks nested maps along keys and returns what it finds, or nil.
func dig(obj any, keys ...string) any {
	for _, k := range keys {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil
		}
		obj = m[k]
	}
	return obj
}

// stripDescriptions removes every schema description below node. A property
// that is itself named "description" is a schema, not a description, and is
// walked like any other.
func stripDescriptions(node any) {
	switch n := node.(type) {
	case map[string]any:
		if d, ok := n["description"].(string); ok && d != "" {
			delete(n, "description")
		}
		for _, v := range n {
			stripDescriptions(v)
		}
	case []any:
		for _, v := range n {
			stripDescriptions(v)
		}
	}
}
