// Command release makes the files of a release, besides the images
// (hack/images builds and pushes those; hack/release.sh runs both):
//
//	install.yaml, install-v2.yaml   the standalone overlays of the v1 and v2
//	                                operators, every image of ours pinned by
//	                                the digest hack/images computed
//	kubectl-mpijob_<version>_<os>_<arch>.tar.gz
//	                                the kubectl plugin for linux and darwin,
//	                                amd64 and arm64, with LICENSE
//	mpijob.yaml                     a krew manifest of those archives
//	mpijob-<v>-py3-none-any.whl,    the Python SDK (sdk/python), built with
//	mpijob-<v>.tar.gz               Debian's setuptools and wheel, LICENSE in both
//	checksums.txt                   sha256sum's lines for all of the above
//
// Everything is reproducible: the same commit, toolchains and
// --source-date-epoch give the same bytes, so that anyone can check a
// release against its sources.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

func main() {
	harness.Main("release", parseFlags, func(ctx context.Context, o options) int {
		if err := run(ctx, o); err != nil {
			fmt.Fprintf(os.Stderr, "release: %v\n", err)
			return harness.ExitIncomplete
		}
		return harness.ExitOK
	})
}

// options are the inputs of one release.
type options struct {
	root    string
	out     string
	version string
	commit  string
	// created is SOURCE_DATE_EPOCH: the time of every file in an archive.
	created time.Time
	// images is hack/images' --digests file: what the bundles pin.
	images string
	// downloadURL is where the release's files are downloaded from, the
	// base of the krew manifest's URIs.
	downloadURL string
	python      string
}

func parseFlags(args []string) (options, error) {
	var o options
	var epoch int64
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", ".", "root of the repository")
	fs.StringVar(&o.out, "out", "_output/release", "directory of the release's files")
	fs.StringVar(&o.version, "version", "", "the release's version, vX.Y.Z")
	fs.StringVar(&o.commit, "commit", "", "git commit stamped into the plugin")
	fs.Int64Var(&epoch, "source-date-epoch", -1, "time of every timestamp, in seconds since the epoch")
	fs.StringVar(&o.images, "images", "", "hack/images' --digests file: <registry>/<name>@<digest> per image")
	fs.StringVar(&o.downloadURL, "download-url", "", "URL the release's files are downloaded from (krew's URIs)")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "Python with setuptools and wheel (Debian's)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.created = time.Unix(epoch, 0).UTC()
	switch {
	case epoch < 0:
		return o, fmt.Errorf("--source-date-epoch is required")
	case o.version == "" || o.commit == "":
		return o, fmt.Errorf("--version and --commit are required")
	case o.images == "" || o.downloadURL == "":
		return o, fmt.Errorf("--images and --download-url are required")
	}
	var err error
	if o.root, err = filepath.Abs(o.root); err != nil {
		return o, err
	}
	o.out, err = filepath.Abs(o.out)
	return o, err
}

// run writes every file of the release into o.out, then checksums.txt
// over all of them.
func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	steps := []struct {
		name string
		do   func(context.Context, options) error
	}{
		{"install bundles", writeBundles},
		{"kubectl plugin", writePlugin},
		{"Python SDK", writeSDK},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.do(ctx, o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "release: %s in %s\n", s.name, time.Since(start).Round(100*time.Millisecond))
	}
	return writeChecksums(o.out)
}
