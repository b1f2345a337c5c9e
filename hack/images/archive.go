package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// written is an archive as the summary prints it.
type written struct {
	file, ref string
	digest    v1.Hash
}

// buildImage builds spec for every platform of o and writes its archives
// into o.out.
func buildImage(ctx context.Context, o options, spec imagespec.Spec, base layer, work string) ([]written, error) {
	refs, err := references(o, spec)
	if err != nil {
		return nil, err
	}
	imgs, err := platformImages(ctx, o, spec, base, work)
	if err != nil {
		return nil, err
	}
	idx := imageIndex(o, imgs)
	if o.push {
		if err := pushIndex(ctx, idx, refs); err != nil {
			return nil, err
		}
	}
	file := filepath.Join(o.out, spec.IndexArchive())
	if err := writeArchive(file, o.created, func(lp layout.Path) error { return appendIndex(lp, idx, refs) }); err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	out := []written{{file: file, ref: refs[0].String(), digest: digest}}
	for i, img := range imgs {
		file := filepath.Join(o.out, spec.PlatformArchive(o.platforms[i]))
		p := o.platforms[i]
		if err := writeArchive(file, o.created, func(lp layout.Path) error { return appendImage(lp, img, p, refs) }); err != nil {
			return nil, err
		}
		if digest, err = img.Digest(); err != nil {
			return nil, err
		}
		out = append(out, written{file: file, ref: refs[0].String(), digest: digest})
	}
	return out, nil
}

// references are spec's name with each tag of o.
func references(o options, spec imagespec.Spec) ([]name.Tag, error) {
	refs := make([]name.Tag, 0, len(o.tags))
	for _, t := range o.tags {
		ref, err := name.NewTag(spec.Repository(o.registry)+":"+t, name.StrictValidation)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

func refAnnotations(ref name.Tag) map[string]string {
	return map[string]string{imagespec.AnnotationImageName: ref.String(), imagespec.AnnotationRefName: ref.TagStr()}
}

// appendIndex writes idx into the layout once for each of refs.
func appendIndex(lp layout.Path, idx v1.ImageIndex, refs []name.Tag) error {
	for _, ref := range refs {
		if err := lp.AppendIndex(idx, layout.WithAnnotations(refAnnotations(ref))); err != nil {
			return err
		}
	}
	return nil
}

// appendImage writes img into the layout once for each of refs, and the
// manifest.json that names it with all refs for Docker's own image store.
func appendImage(lp layout.Path, img v1.Image, p v1.Platform, refs []name.Tag) error {
	for _, ref := range refs {
		if err := lp.AppendImage(img, layout.WithAnnotations(refAnnotations(ref)), layout.WithPlatform(p)); err != nil {
			return err
		}
	}
	manifest, err := dockerManifest(img, refs)
	if err != nil {
		return err
	}
	return lp.WriteFile("manifest.json", manifest, 0o644)
}

// dockerManifest is the manifest.json of `docker load` for img: its
// configuration and layers by their paths in the OCI layout.
func dockerManifest(img v1.Image, refs []name.Tag) ([]byte, error) {
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	d := tarball.Descriptor{Config: blobPath(cfg)}
	for _, ref := range refs {
		d.RepoTags = append(d.RepoTags, ref.String())
	}
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return nil, err
		}
		d.Layers = append(d.Layers, blobPath(digest))
	}
	return json.Marshal(tarball.Manifest{d})
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// writeArchive fills a new OCI image layout with fill and writes it to
// file as a tar archive, by way of a temporary file.
func writeArchive(file string, mtime time.Time, fill func(layout.Path) error) error {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := fill(lp); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := tarDir(tmp, dir, mtime); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// tarDir writes the tree under dir to file in lexical order, every entry
// owned by root and modified at mtime, files 0644 and directories 0755.
func tarDir(file, dir string, mtime time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return tarEntry(tw, p, filepath.ToSlash(rel), d, mtime)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func tarEntry(tw *tar.Writer, p, rel string, d fs.DirEntry, mtime time.Time) error {
	hdr := &tar.Header{Name: rel, Mode: 0o644, ModTime: mtime, Typeflag: tar.TypeReg}
	if d.IsDir() {
		hdr.Name += "/"
		hdr.Mode = 0o755
		hdr.Typeflag = tar.TypeDir
		return tw.WriteHeader(hdr)
	}
	if !d.Type().IsRegular() {
		return fmt.Errorf("%s: not a regular file", p)
	}
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	hdr.Size = info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}
