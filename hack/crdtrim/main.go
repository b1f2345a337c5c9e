// Command crdtrim reads the MPIJob CRD that controller-gen generates on
// standard input and writes it back with two changes:
//
//   - spec.mpiReplicaSpecs, a map in Go, lists its two keys, Launcher and
//     Worker, as properties of their own, so that kubectl explain reaches
//     into them (mpijob.spec.mpiReplicaSpecs.Worker.template) and field
//     validation names an unknown replica type like any unknown field; the
//     replicas' restartPolicy becomes an enum;
//   - the pod templates lose their descriptions. Those come from core/v1 and
//     make up most of the file, which would otherwise not fit the
//     last-applied annotation of a client-side kubectl apply; the
//     descriptions of the MPIJob's own fields stay;
//   - fields that come from kubeflow/common and core/v1, where no marker
//     can reach, get the bounds the controller relies on (see bounds): the
//     run policy's values, container names that are DNS labels, at most
//     MaxWorkers workers;
//   - the versions that upstream installs served (v1alpha2, v2beta1) are
//     listed as deprecated, not the storage version, with a schema that
//     keeps whatever their objects hold. The API server refuses a CRD
//     update that drops a version still named in status.storedVersions, so
//     without them the CRD would not apply over such an install. They stay
//     served because the children of those objects name their owner
//     through them: the garbage collector looks the owner up through that
//     version, and a version that is not served reads as an owner that is
//     gone, whose pods it deletes.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
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
		specs, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties",
			"mpiReplicaSpecs").(map[string]any)
		if !ok {
			return fmt.Errorf("no spec.mpiReplicaSpecs in the schema")
		}
		if err := replicaProperties(specs); err != nil {
			return err
		}
		spec := dig(v, "schema", "openAPIV3Schema", "properties", "spec")
		for _, b := range bounds {
			if err := b.apply(spec); err != nil {
				return err
			}
		}
	}
	for _, name := range legacyVersions {
		versions = append(versions, legacyVersion(name))
	}
	crd["spec"].(map[string]any)["versions"] = versions
	trimmed, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	_, err = out.Write(append([]byte("---\n"), trimmed...))
	return err
}

// legacyVersions are the versions of upstream installs whose objects, and
// their children's owner references, may still be in a cluster; see
// legacyVersion.
var legacyVersions = []string{"v1alpha2", "v2beta1"}

// legacyVersion serves a version of upstream's only so that objects of an
// upstream install, and their children, survive this CRD: deprecated, not
// the storage version, with a status subresource and a schema that keeps
// whatever those objects hold. This operator runs v1 jobs only.
func legacyVersion(name string) map[string]any {
	return map[string]any{
		"name":       name,
		"served":     true,
		"storage":    false,
		"deprecated": true,
		"deprecationWarning": "kubeflow.org/" + name + " MPIJob is served only to keep the jobs of an upstream install; " +
			"the mpi-operator of this installation runs kubeflow.org/v1 MPIJobs and leaves " + name + " ones alone",
		"subresources": map[string]any{"status": map[string]any{}},
		"schema": map[string]any{
			"openAPIV3Schema": map[string]any{
				"type":                                 "object",
				"x-kubernetes-preserve-unknown-fields": true,
			},
		},
	}
}

// replicaDescriptions describe the two replica types.
var replicaDescriptions = map[string]string{
	"Launcher": "Launcher is the pod that runs mpirun or horovodrun; replicas must be 1.",
	"Worker": fmt.Sprintf("Worker are the pods the launcher starts MPI ranks on, through kubectl exec; "+
		"replicas may be 0 to %d.", kubeflow.MaxWorkers),
}

// dnsLabel is the pattern of a container name, which Kubernetes requires
// to be a DNS-1123 label of at most 63 characters.
const dnsLabel = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`

// bound adds set to the schema at path below spec: property names joined
// by dots, "[]" after a name for the items of that list.
type bound struct {
	path string
	set  map[string]any
}

// bounds are what the schema of spec gains where the fields come from
// kubeflow/common and core/v1. The run policy's limits are a Kubernetes
// Job's: a backoffLimit or ttlSecondsAfterFinished of 0 or more, an
// activeDeadlineSeconds of at least 1 (0 would fail the job as it starts).
// Container names must be DNS labels, as the API server requires of a
// pod's: checking them here refuses the job instead of failing it on its
// first pod, and their maxLength is what keeps the estimated cost of the
// CEL rule that looks for spec.mainContainer among the workers' containers
// within the API server's budget (without it the CRD is refused).
var bounds = func() []bound {
	name := map[string]any{"maxLength": 63, "pattern": dnsLabel}
	b := []bound{
		{"runPolicy.cleanPodPolicy", map[string]any{"enum": []any{"None", "Running", "All"}}},
		{"runPolicy.backoffLimit", map[string]any{"minimum": 0}},
		{"runPolicy.activeDeadlineSeconds", map[string]any{"minimum": 1}},
		{"runPolicy.ttlSecondsAfterFinished", map[string]any{"minimum": 0}},
		{"elasticPolicy.minReplicas", map[string]any{"maximum": kubeflow.MaxWorkers}},
		{"elasticPolicy.maxReplicas", map[string]any{"maximum": kubeflow.MaxWorkers}},
		{"mpiReplicaSpecs.Worker.replicas", map[string]any{"maximum": kubeflow.MaxWorkers}},
	}
	for _, rt := range []string{"Launcher", "Worker"} {
		pod := "mpiReplicaSpecs." + rt + ".template.spec."
		b = append(b,
			bound{pod + "containers[].name", name},
			bound{pod + "initContainers[].name", name},
		)
	}
	return b
}()

// apply sets b's keys in the schema found below spec; a path that is not
// there is an error, so that a change of the generated schema cannot drop
// a bound unnoticed.
func (b bound) apply(spec any) error {
	node := spec
	for _, step := range strings.Split(b.path, ".") {
		name, list := strings.CutSuffix(step, "[]")
		node = dig(node, "properties", name)
		if list {
			node = dig(node, "items")
		}
		if node == nil {
			return fmt.Errorf("no schema at spec.%s", b.path)
		}
	}
	schema, ok := node.(map[string]any)
	if !ok {
		return fmt.Errorf("no schema at spec.%s", b.path)
	}
	for k, v := range b.set {
		schema[k] = v
	}
	return nil
}

// restartPolicies are the values of kubeflow/common's RestartPolicy.
var restartPolicies = []any{"Always", "OnFailure", "Never", "ExitCode"}

// replicaProperties turns the map schema of mpiReplicaSpecs into an object
// with a Launcher and a Worker property, each the replica schema with its
// pod template's descriptions stripped.
func replicaProperties(specs map[string]any) error {
	replica, ok := specs["additionalProperties"].(map[string]any)
	if !ok {
		return fmt.Errorf("spec.mpiReplicaSpecs has no additionalProperties schema")
	}
	props, _ := replica["properties"].(map[string]any)
	template, ok := props["template"].(map[string]any)
	if !ok {
		return fmt.Errorf("no pod template schema under spec.mpiReplicaSpecs")
	}
	for _, child := range []string{"properties", "items", "additionalProperties"} {
		if c, ok := template[child]; ok {
			stripDescriptions(c)
		}
	}
	if policy, ok := props["restartPolicy"].(map[string]any); ok {
		policy["enum"] = restartPolicies
	}
	delete(specs, "additionalProperties")
	named := map[string]any{}
	for name, desc := range replicaDescriptions {
		schema, err := deepCopy(replica)
		if err != nil {
			return err
		}
		schema["description"] = desc
		named[name] = schema
	}
	specs["properties"] = named
	return nil
}

func deepCopy(m map[string]any) (map[string]any, error) {
	data, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, yaml.Unmarshal(data, &out)
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
