package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// bundles are the install files and the overlay each renders: the
// standalone ones, since a bundle is for a cluster without Kubeflow.
var bundles = []struct{ file, overlay string }{
	{"install.yaml", "manifests/overlays/standalone"},
	{"install-v2.yaml", "v2/manifests/overlays/standalone"},
}

// writeBundles renders each overlay and pins its images.
func writeBundles(_ context.Context, o options) error {
	pins, err := readPins(o.images)
	if err != nil {
		return err
	}
	for _, b := range bundles {
		doc, err := render(filepath.Join(o.root, b.overlay))
		if err != nil {
			return fmt.Errorf("%s: %w", b.overlay, err)
		}
		if doc, err = pin(doc, pins); err != nil {
			return fmt.Errorf("%s: %w", b.overlay, err)
		}
		head := fmt.Sprintf("# mpi-operator %s (%s), rendered from %s.\n# kubectl apply --server-side -f %s\n", o.version, o.commit, b.overlay, b.file)
		if err := os.WriteFile(filepath.Join(o.out, b.file), append([]byte(head), doc...), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render is the kustomize build of dir, by the kustomize that kubectl
// v1.35 carries (the same module version), in kubectl's order of
// resources: namespaces and CRDs before what needs them.
func render(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// readPins reads hack/images' digests file into what pin replaces: the
// reference the manifests give each image (the default registry, tag
// latest) to the image's index by digest in the release's registry.
func readPins(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pins := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		ref := strings.TrimSpace(sc.Text())
		repo, digest, ok := strings.Cut(ref, "@")
		if !ok || !strings.HasPrefix(digest, "sha256:") {
			return nil, fmt.Errorf("%s: %q is not <registry>/<name>@sha256:<digest>", file, ref)
		}
		spec, ok := imagespec.ByName(repo[strings.LastIndex(repo, "/")+1:])
		if !ok {
			return nil, fmt.Errorf("%s: %s is none of hack/images' images", file, repo)
		}
		pins[spec.DefaultReference()] = ref
	}
	if len(pins) != len(imagespec.Images) {
		return nil, fmt.Errorf("%s names %d images, want the %d of hack/images", file, len(pins), len(imagespec.Images))
	}
	return pins, sc.Err()
}

// tagged finds a reference to one of our images by tag: what no bundle
// may keep, since a tag can move after the release.
var tagged = regexp.MustCompile(regexp.QuoteMeta(imagespec.DefaultRegistry) + `/[a-z0-9.-]+:[\w.-]+`)

// pin replaces every reference the manifests make to our images, in
// image: fields and in flags alike (the v1 operator's
// --kubectl-delivery-image, which kustomize's images: would not rewrite),
// with its pinned one.
func pin(doc []byte, pins map[string]string) ([]byte, error) {
	replaced := 0
	for from, to := range pins {
		replaced += bytes.Count(doc, []byte(from))
		doc = bytes.ReplaceAll(doc, []byte(from), []byte(to))
	}
	if replaced == 0 {
		return nil, fmt.Errorf("no image of ours to pin")
	}
	if left := tagged.Find(doc); left != nil {
		return nil, fmt.Errorf("image %s is not pinned by digest", left)
	}
	return doc, nil
}
