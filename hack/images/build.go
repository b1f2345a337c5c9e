package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeflow/mpi-operator/hack/gobuild"
	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// goBuild builds spec's binary for platform p into out (hack/gobuild).
func goBuild(ctx context.Context, o options, spec imagespec.Spec, p v1.Platform, out string) error {
	return gobuild.Build(ctx, gobuild.Target{
		Dir: filepath.Join(o.root, spec.Module), Package: spec.Package,
		OS: p.OS, Arch: p.Architecture, Out: out,
	}, gobuild.Stamp{Version: o.version, Commit: o.commit})
}

// platformLayers are spec's layers for platform p above base: kubectl if
// the image carries it, then the binary built into work.
func platformLayers(ctx context.Context, o options, spec imagespec.Spec, p v1.Platform, base layer, work string) ([]layer, error) {
	layers := []layer{base}
	if spec.Kubectl {
		kubectl, err := os.ReadFile(filepath.Join(o.kubectlDir, imagespec.PlatformDir(p), "kubectl"))
		if err != nil {
			return nil, fmt.Errorf("kubectl for %s (hack/kubectl.sh): %w", p.String(), err)
		}
		l, err := newLayer(imagespec.ExecutableEntries(imagespec.KubectlPath, kubectl), o.created, "hack/kubectl.sh: /"+imagespec.KubectlPath)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	bin := filepath.Join(work, imagespec.PlatformDir(p), spec.Name)
	if err := goBuild(ctx, o, spec, p, bin); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	l, err := newLayer(imagespec.ExecutableEntries(spec.Name, data), o.created, "go build "+spec.Package+": "+spec.Entrypoint())
	if err != nil {
		return nil, err
	}
	return append(layers, l), nil
}

// platformImage is spec's OCI image for platform p, made of layers.
func platformImage(o options, spec imagespec.Spec, p v1.Platform, layers []layer) (v1.Image, error) {
	cfg := spec.ConfigFile(p, o.version, o.commit, o.source, o.created)
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{
			Layer:     l.Layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: o.created}, CreatedBy: l.createdBy},
		})
	}
	return mutate.Append(img, adds...)
}

// platformImages builds spec for every platform of o.
func platformImages(ctx context.Context, o options, spec imagespec.Spec, base layer, work string) ([]v1.Image, error) {
	out := make([]v1.Image, 0, len(o.platforms))
	for _, p := range o.platforms {
		layers, err := platformLayers(ctx, o, spec, p, base, work)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(o, spec, p, layers)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// imageIndex is the multi-platform index of images, one per platform of o
// in the same order.
func imageIndex(o options, imgs []v1.Image) v1.ImageIndex {
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for i, img := range imgs {
		p := o.platforms[i]
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
}
