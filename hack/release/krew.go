package main

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"sigs.k8s.io/yaml"
)

// krewManifestFile is the krew manifest's file name: the plugin's name,
// as krew's index names its manifests.
const krewManifestFile = "mpijob.yaml"

// krewPlugin is a krew plugin manifest (krew's index format, apiVersion
// krew.googlecontainertools.github.com/v1alpha2), with only the fields
// this plugin fills.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec krewSpec `json:"spec"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

// krewPlatform is where krew finds the plugin for the machines its
// selector matches, and what it checks the download against.
type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	// Files are what krew installs of the archive: the binary and the
	// license, both at the archive's root.
	Files []krewFile `json:"files"`
	Bin   string     `json:"bin"`
}

// krewFile is a file or glob of the archive (From) and where krew installs
// it, relative to the plugin's directory (To).
type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

const krewDescription = `Submits, lists, watches, scales and deletes elastic MPIJobs
(kubeflow.org/v1 and v2beta1) and reads their launcher's and
workers' logs. Scaling out waits for the new workers to run and
rolls back when they cannot be scheduled; scaling in can name
the workers to remove.
`

// krewManifest is the krew manifest of the plugin's archives, one per
// platform of pluginPlatforms in order, downloaded from o.downloadURL.
func krewManifest(o options, archives [][]byte) ([]byte, error) {
	m := krewPlugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"}
	m.Metadata.Name = strings.TrimSuffix(krewManifestFile, ".yaml")
	m.Spec = krewSpec{
		Version:          o.version,
		Homepage:         "https://github.com/kubeflow/mpi-operator",
		ShortDescription: "Run and scale elastic MPIJobs",
		Description:      krewDescription,
	}
	for i, p := range pluginPlatforms {
		sum := sha256.Sum256(archives[i])
		kp := krewPlatform{
			URI:    strings.TrimSuffix(o.downloadURL, "/") + "/" + pluginArchive(o.version, p),
			SHA256: hex.EncodeToString(sum[:]),
			Files:  []krewFile{{From: pluginBinary, To: "."}, {From: licenseFile, To: "."}},
			Bin:    pluginBinary,
		}
		kp.Selector.MatchLabels = map[string]string{"os": p.OS, "arch": p.Arch}
		m.Spec.Platforms = append(m.Spec.Platforms, kp)
	}
	return yaml.Marshal(m)
}
