// Command crdtrim reads an MPIJob CRD that controller-gen generates on
// standard input and writes it back with these changes:
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
//   - fields that come from kubeflow/common and core/v1, or sit below the
//     replica map, where no marker can reach, get the bounds the
//     controller relies on (see apis and commonBounds): the run policy's values, container
//     names that are DNS labels, at most MaxWorkers workers;
//   - the versions that other installs stored objects in are listed, not as
//     the storage version, with a schema that keeps whatever their objects
//     hold. The API server refuses a CRD update that drops a version still
//     named in status.storedVersions, so without them the CRD would not
//     apply over such an install. The v1 CRD keeps them served and
//     deprecated: the children of those objects name their owner through
//     them, and the garbage collector looks the owner up through the
//     apiVersion of the ownerReference; through a version that is not
//     served it cannot, and the collector of Kubernetes 1.35 may take a
//     lookup through a mapping it has not rediscovered yet for the owner's
//     absence and delete the children of a running job. Served, they are
//     read-only: rules refuse a create through them and an update that
//     changes the spec or the status, so that nothing can be stored
//     through them that the v1 operator's typed client cannot decode,
//     while reads, deletions and metadata-only writes (the garbage
//     collector's) go through. The v2beta1 CRD lists them unserved:
//     served, v1 would be the version kubectl picks for a bare "mpijob"
//     (discovery prefers a GA version to a beta one), which has neither
//     this API's schema nor its scale subresource; the jobs stored in it
//     stay readable through v2beta1, and the v2beta1 operator's children
//     name their owner through v2beta1.
//
// The API version of the input chooses what it does (see apis): the v1
// operator's CRD keeps v1alpha2 and v2beta1, which upstream's installs
// stored jobs in; the v2 operator's (v2beta1) keeps v1 and v1alpha2, which
// upstream's v0.3.0 kustomize install and the v1 operator's install of this
// repository served. MaxWorkers, which the schema needs as a number, is
// read from the API's limits.go (-limits), so that it is written in one
// place only.
//
// Usage: crdtrim -limits pkg/apis/kubeflow/v1/limits.go < in.yaml > out.yaml
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	limits := flag.String("limits", "", "the API's limits.go, which declares the constant MaxWorkers")
	flag.Parse()
	err := func() error {
		if *limits == "" || flag.NArg() > 0 {
			return fmt.Errorf("usage: crdtrim -limits FILE < in.yaml > out.yaml")
		}
		src, err := os.ReadFile(*limits)
		if err != nil {
			return err
		}
		maxWorkers, err := readMaxWorkers(*limits, src)
		if err != nil {
			return err
		}
		return run(os.Stdin, os.Stdout, maxWorkers)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdtrim:", err)
		os.Exit(1)
	}
}

// readMaxWorkers evaluates the constant MaxWorkers of a Go file that
// imports nothing, as the limits.go of each API is written.
func readMaxWorkers(name string, src []byte) (int64, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return 0, err
	}
	pkg, err := new(types.Config).Check(file.Name.Name, fset, []*ast.File{file}, nil)
	if err != nil {
		return 0, fmt.Errorf("%s must declare MaxWorkers from constants of its own, with no imports: %w", name, err)
	}
	c, ok := pkg.Scope().Lookup("MaxWorkers").(*types.Const)
	if !ok {
		return 0, fmt.Errorf("%s declares no constant MaxWorkers", name)
	}
	n, exact := constant.Int64Val(constant.ToInt(c.Val()))
	if !exact || n < 1 {
		return 0, fmt.Errorf("%s: MaxWorkers is %s, not a positive integer", name, c.Val())
	}
	return n, nil
}

func run(in io.Reader, out io.Writer, maxWorkers int64) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) != 1 {
		return fmt.Errorf("want one version in spec.versions, the input has %d", len(versions))
	}
	name, _ := dig(versions[0], "name").(string)
	a, ok := apis[name]
	if !ok {
		return fmt.Errorf("no rules for the API version %q", name)
	}
	specs, ok := dig(versions[0], "schema", "openAPIV3Schema", "properties", "spec", "properties",
		"mpiReplicaSpecs").(map[string]any)
	if !ok {
		return fmt.Errorf("no spec.mpiReplicaSpecs in the schema")
	}
	if err := replicaProperties(specs, a.replicaDescriptions(maxWorkers)); err != nil {
		return err
	}
	spec := dig(versions[0], "schema", "openAPIV3Schema", "properties", "spec")
	for _, b := range a.bounds(maxWorkers) {
		if err := b.apply(spec); err != nil {
			return err
		}
	}
	for _, legacy := range a.legacyVersions {
		warning := ""
		if a.legacyWarning != nil {
			warning = a.legacyWarning(legacy)
		}
		versions = append(versions, legacyVersion(legacy, warning))
	}
	crd["spec"].(map[string]any)["versions"] = versions
	trimmed, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	_, err = out.Write(append([]byte("---\n"), trimmed...))
	return err
}

// api is what crdtrim does to the CRD of one API version.
type api struct {
	// launcher says what the launcher is, and reach how it reaches the
	// workers, in the descriptions of the two replica types.
	launcher, reach string
	// bounds are added to the schema of spec, beyond the ones every API
	// gets (see commonBounds).
	bounds func(maxWorkers int64) []bound
	// legacyVersions are the other versions that installs stored objects
	// in; legacyWarning is the deprecation warning of each, when they stay
	// served, and nil when they are listed unserved.
	legacyVersions []string
	legacyWarning  func(legacy string) string
}

// replicaDescriptions describe the two replica types.
func (a api) replicaDescriptions(maxWorkers int64) map[string]string {
	return map[string]string{
		"Launcher": a.launcher + "; replicas must be 1.",
		"Worker": fmt.Sprintf("Worker are the pods the launcher starts MPI ranks on, %s; replicas may be 0 to %d.",
			a.reach, maxWorkers),
	}
}

// apis are the API versions crdtrim knows, by name.
var apis = map[string]api{
	"v1": {
		launcher: "Launcher is the pod that runs mpirun or horovodrun",
		reach:    "through kubectl exec",
		// The run policy is kubeflow/common's, which has no markers: its
		// limits are a Kubernetes Job's, a backoffLimit or
		// ttlSecondsAfterFinished of 0 or more, an activeDeadlineSeconds of
		// at least 1 (0 would fail the job as it starts).
		bounds: func(maxWorkers int64) []bound {
			return append([]bound{
				{"runPolicy.cleanPodPolicy", map[string]any{"enum": []any{"None", "Running", "All"}}},
				{"runPolicy.backoffLimit", map[string]any{"minimum": 0}},
				{"runPolicy.activeDeadlineSeconds", map[string]any{"minimum": 1}},
				{"runPolicy.ttlSecondsAfterFinished", map[string]any{"minimum": 0}},
			}, commonBounds(maxWorkers)...)
		},
		legacyVersions: []string{"v1alpha2", "v2beta1"},
		legacyWarning: func(legacy string) string {
			return "kubeflow.org/" + legacy + " MPIJob is served only to keep the jobs of an upstream install; " +
				"the mpi-operator of this installation runs kubeflow.org/v1 MPIJobs and leaves " + legacy + " ones alone"
		},
	},
	// The v2beta1 types carry markers for their own fields; only what lies
	// below the replica map is left to crdtrim.
	"v2beta1": {
		launcher: "Launcher is the pod of the launcher Job, which runs mpirun or horovodrun",
		reach:    "over SSH",
		bounds:   commonBounds,
		// v1alpha2 and v1 were served, beside v2beta1, by upstream's
		// v0.3.0 kustomize install; this repository's v1 install stores
		// its jobs as v1. They are listed, not served (see the package
		// comment).
		legacyVersions: []string{"v1", "v1alpha2"},
	},
}

// legacyVersion lists a version of another install only so that its
// objects survive this CRD: not the storage version, with a status
// subresource and a schema that keeps whatever those objects hold. With a
// warning it stays served, deprecated and read-only (see unchanged);
// without one it is not served.
func legacyVersion(name, warning string) map[string]any {
	schema := map[string]any{
		"type":                                 "object",
		"x-kubernetes-preserve-unknown-fields": true,
	}
	v := map[string]any{
		"name":         name,
		"served":       warning != "",
		"storage":      false,
		"subresources": map[string]any{"status": map[string]any{}},
		"schema":       map[string]any{"openAPIV3Schema": schema},
	}
	if warning != "" {
		v["deprecated"] = true
		v["deprecationWarning"] = warning
		// A create has no old object: the rule refuses it.
		schema["x-kubernetes-validations"] = []any{map[string]any{
			"rule":            "oldSelf.hasValue()",
			"optionalOldSelf": true,
			"message":         readOnlyMessage(name, "create"),
		}}
		schema["properties"] = map[string]any{"spec": unchanged(name, "spec"), "status": unchanged(name, "status")}
	}
	return v
}

// unchanged is the schema of a served legacy version's spec or status: an
// object that keeps whatever it holds, and a rule that refuses an update
// that changes it, so that metadata-only writes (the garbage collector's)
// pass.
func unchanged(version, field string) map[string]any {
	return map[string]any{
		"type":                                 "object",
		"x-kubernetes-preserve-unknown-fields": true,
		"x-kubernetes-validations": []any{map[string]any{
			"rule":    "self == oldSelf",
			"message": readOnlyMessage(version, "write the "+field+" of"),
		}},
	}
}

// readOnlyMessage says that version is read-only and what to do instead.
func readOnlyMessage(version, what string) string {
	return fmt.Sprintf("kubeflow.org/%s MPIJobs are read-only in this installation: %s MPIJobs through kubeflow.org/v1",
		version, what)
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

// commonBounds are what the schema of spec gains in every API: at most
// maxWorkers workers, and container names that are DNS labels, as the API
// server requires of a pod's. Checking the names here refuses the job
// instead of failing it on its first pod, and their maxLength keeps the
// estimated cost of CEL rules that look at them within the API server's
// budget.
func commonBounds(maxWorkers int64) []bound {
	name := map[string]any{"maxLength": 63, "pattern": dnsLabel}
	b := []bound{
		{"elasticPolicy.minReplicas", map[string]any{"maximum": maxWorkers}},
		{"elasticPolicy.maxReplicas", map[string]any{"maximum": maxWorkers}},
		{"mpiReplicaSpecs.Worker.replicas", map[string]any{"maximum": maxWorkers}},
	}
	for _, rt := range []string{"Launcher", "Worker"} {
		pod := "mpiReplicaSpecs." + rt + ".template.spec."
		b = append(b,
			bound{pod + "containers[].name", name},
			bound{pod + "initContainers[].name", name},
		)
	}
	return b
}

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
func replicaProperties(specs map[string]any, descriptions map[string]string) error {
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
	for name, desc := range descriptions {
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
