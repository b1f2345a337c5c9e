// Package version reports which build of the operator is running.
//
// Release builds stamp the values with the linker, for example:
//
//	go build -ldflags "-X github.com/kubeflow/mpi-operator/pkg/version.Version=v0.4.0 \
//	  -X github.com/kubeflow/mpi-operator/pkg/version.GitCommit=$(git rev-parse HEAD)" \
//	  ./cmd/mpi-operator
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release of this build; "dev" for unstamped builds.
var Version = "dev"

// GitCommit is the commit this build was made from. When the linker does not
// set it, the VCS revision that the Go toolchain records is used instead.
var GitCommit = ""

// Commit returns GitCommit, or the revision from the Go build information
// (with a "-dirty" suffix for modified trees), or "unknown".
func Commit() string {
	if GitCommit != "" {
		return GitCommit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// String returns a one-line description of the build, suitable for
// --version output and for the first line of the operator's log.
func String() string {
	return fmt.Sprintf("mpi-operator %s (commit %s, %s, %s/%s)",
		Version, Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
