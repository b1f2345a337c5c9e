// Command images builds the container images of the project (the v1 and
// v2 operators and kubectl-delivery) without a container engine, through
// go-containerregistry: for every image, a multi-platform OCI image layout
// archive and one archive per platform that also carries the manifest.json
// of `docker load`. hack/images.sh runs it with the inputs it needs; see
// docs/images.md. With --push it also uploads each image's multi-platform
// index to the registry, and --digests writes the indexes' digests for the
// release (hack/release.sh) to pin.
//
// The archives are reproducible: the same sources, Go toolchain, kubectl
// binaries and CA bundle make byte-identical files. Every timestamp is
// --source-date-epoch, the binaries are built with -trimpath and no VCS
// stamp, and every tar header and JSON document is written in a fixed order.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line into options and checks them.
func parseFlags(args []string) (options, error) {
	var o options
	var epoch int64
	var platforms, tags string
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", ".", "root of the repository")
	fs.StringVar(&o.out, "out", "_output/images", "directory of the archives")
	fs.StringVar(&o.registry, "registry", imagespec.DefaultRegistry, "registry and name prefix of the images")
	fs.StringVar(&tags, "tags", imagespec.DefaultTag, "comma-separated tags of every image")
	fs.StringVar(&o.version, "version", "", "version stamped into the binaries and the version label")
	fs.StringVar(&o.commit, "commit", "", "git commit stamped into the binaries and the revision label")
	fs.StringVar(&o.source, "source", imagespec.DefaultSource, "URL of the sources, the source label")
	fs.Int64Var(&epoch, "source-date-epoch", -1, "time of every timestamp, in seconds since the epoch (the commit's time)")
	fs.StringVar(&o.kubectlDir, "kubectl-dir", "", "directory with <os>-<arch>/kubectl for every platform (hack/kubectl.sh)")
	fs.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates for /etc/ssl/certs")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	fs.BoolVar(&o.push, "push", false, "push every image's multi-platform index to the registry, with each tag")
	fs.StringVar(&o.digests, "digests", "", "file to write each image's <registry>/<name>@<index digest> into, a line each")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.tags = splitList(tags)
	o.created = time.Unix(epoch, 0).UTC()
	var err error
	if o.platforms, err = parsePlatforms(platforms); err != nil {
		return o, err
	}
	switch {
	case epoch < 0:
		return o, fmt.Errorf("--source-date-epoch is required")
	case o.version == "" || o.commit == "":
		return o, fmt.Errorf("--version and --commit are required")
	case o.kubectlDir == "":
		return o, fmt.Errorf("--kubectl-dir is required")
	case len(o.tags) == 0:
		return o, fmt.Errorf("--tags names no tag")
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run builds every image for every platform and writes its archives.
func run(ctx context.Context, o options) error {
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return fmt.Errorf("CA bundle (Debian's ca-certificates): %w", err)
	}
	license, err := os.ReadFile(filepath.Join(o.root, "LICENSE"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(o.out, ".build-")
	if err != nil {
		return err
	}
	// go build runs in each binary's module directory.
	if work, err = filepath.Abs(work); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()

	base, err := baseLayer(o.created, ca, license)
	if err != nil {
		return err
	}
	var indexes []pinned
	for _, spec := range imagespec.Images {
		start := time.Now()
		written, err := buildImage(ctx, o, spec, base, work)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.Name, err)
		}
		for _, w := range written {
			fmt.Printf("%s  %s  %s\n", w.digest, w.file, w.ref)
		}
		// The first archive written is the multi-platform one.
		indexes = append(indexes, pinned{repository: spec.Repository(o.registry), digest: written[0].digest.String()})
		fmt.Fprintf(os.Stderr, "images: built %s in %s\n", spec.Name, time.Since(start).Round(100*time.Millisecond))
	}
	if o.digests == "" {
		return nil
	}
	return writeDigests(o.digests, indexes)
}

// options are the inputs of one build.
type options struct {
	root       string
	out        string
	registry   string
	tags       []string
	version    string
	commit     string
	source     string
	created    time.Time
	kubectlDir string
	caBundle   string
	platforms  []v1.Platform
	push       bool
	digests    string
}

// parsePlatforms reads "os/arch,os/arch".
func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range splitList(s) {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want <os>/<arch>", p)
		}
		out = append(out, v1.Platform{OS: osName, Architecture: arch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform given")
	}
	return out, nil
}
