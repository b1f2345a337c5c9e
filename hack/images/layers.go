package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// layer is a layer of an image with the history line that describes it.
type layer struct {
	v1.Layer
	createdBy string
}

// TarEntries is the uncompressed tar stream of entries, in their order,
// every one owned by its UID (group too), modified at mtime.
func TarEntries(entries []imagespec.Entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.Path,
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.UID,
			ModTime: mtime,
			Size:    int64(len(e.Data)),
		}
		hdr.Typeflag = tar.TypeReg
		if e.Dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Path, err)
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newLayer is a gzip-compressed OCI layer of entries. The compressed form
// is kept once made: every archive of the layer writes the same bytes.
func newLayer(entries []imagespec.Entry, mtime time.Time, createdBy string) (layer, error) {
	raw, err := TarEntries(entries, mtime)
	if err != nil {
		return layer{}, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	return layer{Layer: l, createdBy: createdBy}, err
}

// baseLayer is the layer of BaseEntries.
func baseLayer(mtime time.Time, caBundle, license []byte) (layer, error) {
	return newLayer(imagespec.BaseEntries(caBundle, license), mtime,
		"hack/images: /etc/passwd, /etc/group, CA certificates, /home/nonroot, /licenses/LICENSE, /tmp")
}
