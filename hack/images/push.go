package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushIndex uploads idx, the multi-platform image the archives hold, to
// its registry under each of refs. Credentials come from the Docker
// configuration (~/.docker/config.json, as `docker login` or a CI step
// writes it); a registry on a loopback address is spoken to over plain
// HTTP, as go-containerregistry does for such names.
func pushIndex(ctx context.Context, idx v1.ImageIndex, refs []name.Tag) error {
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	// The first tag uploads the blobs and manifests; the others only name
	// the index that is already there.
	if err := remote.WriteIndex(refs[0], idx, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", refs[0], err)
	}
	for _, ref := range refs[1:] {
		if err := remote.Tag(ref, idx, opts...); err != nil {
			return fmt.Errorf("tagging %s: %w", ref, err)
		}
	}
	return nil
}

// pinned is an image's multi-platform index by its digest:
// <registry>/<name>@sha256:...
type pinned struct{ repository, digest string }

func (p pinned) String() string { return p.repository + "@" + p.digest }

// writeDigests writes each image's pinned reference on a line of its own,
// in the order of imagespec.Images: what hack/release pins the install
// bundles to.
func writeDigests(file string, images []pinned) error {
	var b strings.Builder
	for _, p := range images {
		b.WriteString(p.String() + "\n")
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}
