// Package jobdefaults holds the defaults of the elastic Horovod jobs that
// `kubectl mpijob submit` and the Python SDK's elastic_horovod_job build:
// the values each fills in where a request leaves them open. They are data,
// job-defaults.json, which this package embeds and the SDK ships a copy of
// (sdk/python/mpijob/job-defaults.json, kept equal by `make generate` and
// checked by `make verify`), so that both build the same job for the same
// request. docs/job-defaults.md describes them, and the golden jobs in
// testdata are what both builders must make of the requests there.
package jobdefaults

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed job-defaults.json
var raw []byte

// Defaults are the values of job-defaults.json.
type Defaults struct {
	Containers Containers `json:"containers"`
	// CleanPodPolicy is the job's cleanPodPolicy: spec.cleanPodPolicy in
	// kubeflow.org/v1, spec.runPolicy.cleanPodPolicy in v2beta1.
	CleanPodPolicy string        `json:"cleanPodPolicy"`
	ElasticPolicy  ElasticPolicy `json:"elasticPolicy"`
	// GPUResource is the resource a worker's GPUs are a limit of.
	GPUResource string     `json:"gpuResource"`
	Horovodrun  Horovodrun `json:"horovodrun"`
	// V2beta1Worker is what a v2beta1 worker's container runs: sshd in
	// the foreground, which the launcher reaches over SSH.
	V2beta1Worker Command `json:"v2beta1Worker"`
}

// Containers name the launcher's and the workers' containers.
type Containers struct {
	Launcher string `json:"launcher"`
	Worker   string `json:"worker"`
}

// ElasticPolicy holds the elastic policy's defaults; maxReplicas defaults
// to the workers the job starts with.
type ElasticPolicy struct {
	MinReplicas  int32 `json:"minReplicas"`
	DrainSeconds int32 `json:"drainSeconds"`
}

// Horovodrun holds what the launcher's horovodrun is given besides the
// process counts.
type Horovodrun struct {
	HostDiscoveryScript    string  `json:"hostDiscoveryScript"`
	BlacklistCooldownRange []int32 `json:"blacklistCooldownRange"`
}

// Command is a container's command and arguments.
type Command struct {
	Command []string `json:"command"`
	Args    []string `json:"args"`
}

// JSON is job-defaults.json as embedded.
func JSON() []byte { return bytes.Clone(raw) }

var loaded = mustParse(raw)

// Get returns the defaults; each call its own copy.
func Get() Defaults {
	d := loaded
	d.Horovodrun.BlacklistCooldownRange = append([]int32(nil), d.Horovodrun.BlacklistCooldownRange...)
	d.V2beta1Worker.Command = append([]string(nil), d.V2beta1Worker.Command...)
	d.V2beta1Worker.Args = append([]string(nil), d.V2beta1Worker.Args...)
	return d
}

func mustParse(data []byte) Defaults {
	d, err := Parse(data)
	if err != nil {
		panic(err)
	}
	return d
}

// Parse reads defaults, refusing keys that Defaults does not know, so that
// a value added to the file is a value the builders read.
func Parse(data []byte) (Defaults, error) {
	var d Defaults
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Defaults{}, fmt.Errorf("job-defaults.json: %w", err)
	}
	return d, nil
}
