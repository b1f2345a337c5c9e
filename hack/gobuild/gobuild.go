// Package gobuild builds the project's release binaries the one way both
// hack/images (the binaries of the images) and hack/release (the kubectl
// plugin) need them: static, reproducible, with the version stamped.
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// VersionPackage holds the variables the linker stamps.
const VersionPackage = "github.com/kubeflow/mpi-operator/pkg/version"

// Target is one binary to build.
type Target struct {
	// Dir is the directory of the binary's Go module; Package is the
	// binary's package within it.
	Dir, Package string
	// OS and Arch are GOOS and GOARCH.
	OS, Arch string
	// Out is the file to write.
	Out string
}

// Stamp is what the linker writes into pkg/version.
type Stamp struct {
	Version, Commit string
}

// LDFlags drop the symbol tables (which only make the binary larger) and
// stamp the version and commit.
func (s Stamp) LDFlags() string {
	return strings.Join([]string{"-s", "-w",
		"-X", VersionPackage + ".Version=" + s.Version,
		"-X", VersionPackage + ".GitCommit=" + s.Commit}, " ")
}

// Build runs go build for t: without cgo (a static binary that runs on any
// libc), -trimpath and -buildvcs=false (no path of the build machine nor
// state of its checkout in the binary), so that the same sources and
// toolchain give the same bytes. go build's own output goes to stderr.
func Build(ctx context.Context, t Target, s Stamp) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", s.LDFlags(), "-o", t.Out, t.Package)
	cmd.Dir = t.Dir
	cmd.Env = append(os.Environ(), "GOOS="+t.OS, "GOARCH="+t.Arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w", t.Package, t.OS, t.Arch, err)
	}
	return nil
}
