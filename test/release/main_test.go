// Package release checks `make release` (hack/release.sh, docs/releases.md)
// end to end: two releases of the same commit, the first pushed to a
// registry served in-process on loopback (go-containerregistry's
// pkg/registry), the second a dry build; then their files byte for byte,
// the install bundles applied on a control plane of its own
// (hack/cluster-up.sh through test/harness) and their images resolved in
// that registry, the krew manifest against the plugin's archives, and the
// SDK's wheel installed.
//
// Run it with `make test-release`; KEEP_CLUSTER=1 leaves the cluster
// running.
package release

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// version is the release the tests make: a tag's version, so that the SDK
// is stamped with it too.
const version = "v0.9.0"

// downloadURL is the base of the krew manifest's URIs.
const downloadURL = "https://example.com/mpi-operator/releases/download/" + version

var env struct {
	*harness.Cluster
	// registry is <host:port>/<prefix> of the loopback registry.
	registry string
	// pushed and dry are the two releases' directories: the first pushed
	// its images, the second only built them.
	pushed, dry string
}

func TestMain(m *testing.M) {
	harness.Suite{Name: "release-test", SetUp: setUp}.Run(m)
}

// setUp starts the registry and makes both releases.
func setUp(c *harness.Cluster) (func(), error) {
	env.Cluster = c
	// The registry logs every request; only a failure needs them.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	u, err := url.Parse(srv.URL)
	if err != nil {
		return srv.Close, err
	}
	env.registry = u.Host + "/mpi-operator-elastic"
	env.pushed, env.dry = filepath.Join(c.Dir, "pushed"), filepath.Join(c.Dir, "dry")
	for _, r := range []struct {
		dir  string
		push bool
	}{{env.pushed, true}, {env.dry, false}} {
		if err := makeRelease(r.dir, r.push); err != nil {
			return srv.Close, err
		}
	}
	return srv.Close, nil
}

// makeRelease runs `make release` into dir, as the release workflow does
// but for the registry and the download URL.
func makeRelease(dir string, push bool) error {
	start := time.Now()
	logFile := dir + ".log"
	out, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	pushFlag := "0"
	if push {
		pushFlag = "1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "release", "VERSION="+version, "RELEASE_DIR="+dir,
		"RELEASE_REGISTRY="+env.registry, "RELEASE_PUSH="+pushFlag, "RELEASE_DOWNLOAD_URL="+downloadURL)
	cmd.Dir = env.Root
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		tail, _ := os.ReadFile(logFile)
		return fmt.Errorf("make release into %s: %w\n%s", dir, err, lastLines(string(tail), 30))
	}
	fmt.Fprintf(os.Stderr, "release: make release into %s (push %v) in %s\n", dir, push, time.Since(start).Round(time.Second))
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
