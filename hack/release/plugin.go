package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeflow/mpi-operator/hack/gobuild"
	"github.com/kubeflow/mpi-operator/hack/reprotar"
)

// pluginBinary is the plugin's executable: kubectl finds it on PATH by
// this name, and krew links it by it.
const pluginBinary = "kubectl-mpijob"

// licenseFile is the project's license, at the root of the repository and
// of every plugin archive (krew's index wants it installed with the
// plugin).
const licenseFile = "LICENSE"

// platform is one os/arch the plugin is built for.
type platform struct{ OS, Arch string }

// pluginPlatforms are the platforms of the plugin's archives: the
// machines kubectl users run it on.
var pluginPlatforms = []platform{
	{"linux", "amd64"},
	{"linux", "arm64"},
	{"darwin", "amd64"},
	{"darwin", "arm64"},
}

// pluginArchive is the file name of the plugin's archive for p.
func pluginArchive(version string, p platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginBinary, version, p.OS, p.Arch)
}

// writePlugin builds the plugin for every platform, archives each build
// with the binary and the license at its root, and writes the krew
// manifest of the archives.
func writePlugin(ctx context.Context, o options) error {
	license, err := os.ReadFile(filepath.Join(o.root, licenseFile))
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "release-plugin-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	archives := make([][]byte, 0, len(pluginPlatforms))
	for _, p := range pluginPlatforms {
		archive, err := pluginArchiveFor(ctx, o, p, work, license)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.out, pluginArchive(o.version, p)), archive, 0o644); err != nil {
			return err
		}
		archives = append(archives, archive)
	}
	manifest, err := krewManifest(o, archives)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, krewManifestFile), manifest, 0o644)
}

// pluginArchiveFor builds the plugin for p in work and returns its
// archive, the license beside the binary.
func pluginArchiveFor(ctx context.Context, o options, p platform, work string, license []byte) ([]byte, error) {
	bin := filepath.Join(work, p.OS+"-"+p.Arch, pluginBinary)
	err := gobuild.Build(ctx, gobuild.Target{Dir: o.root, Package: "./cmd/kubectl-mpijob", OS: p.OS, Arch: p.Arch, Out: bin},
		gobuild.Stamp{Version: o.version, Commit: o.commit})
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err = reprotar.Write(&buf, []reprotar.File{
		{Name: pluginBinary, Executable: true, Data: data},
		{Name: licenseFile, Data: license},
	}, o.created)
	return buf.Bytes(), err
}
