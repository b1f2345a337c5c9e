package main

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

func TestParsePlatforms(t *testing.T) {
	cases := []struct {
		in      string
		want    []v1.Platform
		wantErr bool
	}{
		{in: "linux/amd64,linux/arm64", want: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}},
		{in: " linux/arm64 ,", want: []v1.Platform{{OS: "linux", Architecture: "arm64"}}},
		{in: "", wantErr: true},
		{in: "linux", wantErr: true},
		{in: "linux/arm/v7", wantErr: true},
		{in: "/amd64", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parsePlatforms(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parsePlatforms(%q) error %v, want error %t", tc.in, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parsePlatforms(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestExecutableEntries(t *testing.T) {
	data := []byte("binary")
	cases := []struct {
		file string
		want []imagespec.Entry
	}{
		{file: "mpi-operator", want: []imagespec.Entry{{Path: "mpi-operator", Mode: 0o755, Data: data}}},
		{file: "opt/kubectl-delivery/kubectl", want: []imagespec.Entry{
			{Path: "opt", Mode: 0o755, Dir: true},
			{Path: "opt/kubectl-delivery", Mode: 0o755, Dir: true},
			{Path: "opt/kubectl-delivery/kubectl", Mode: 0o755, Data: data},
		}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, imagespec.ExecutableEntries(tc.file, data)); diff != "" {
			t.Errorf("ExecutableEntries(%q) (-want +got):\n%s", tc.file, diff)
		}
	}
}

// header is what TestTarEntries compares of a tar header.
type header struct {
	Name     string
	Typeflag byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Data     string
}

func TestTarEntries(t *testing.T) {
	mtime := time.Unix(1700000000, 0).UTC()
	entries := []imagespec.Entry{
		{Path: "home/nonroot", Mode: 0o700, UID: imagespec.NonRootID, Dir: true},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(imagespec.Passwd)},
		{Path: "tmp", Mode: 0o1777, Dir: true},
	}
	raw, err := TarEntries(entries, mtime)
	if err != nil {
		t.Fatal(err)
	}
	again, err := TarEntries(entries, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, again) {
		t.Error("two tar streams of the same entries differ")
	}
	want := []header{
		{Name: "home/nonroot/", Typeflag: tar.TypeDir, Mode: 0o700, UID: imagespec.NonRootID, GID: imagespec.NonRootID, ModTime: mtime},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: mtime, Data: imagespec.Passwd},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mtime},
	}
	if diff := cmp.Diff(want, readHeaders(t, raw)); diff != "" {
		t.Errorf("tar entries (-want +got):\n%s", diff)
	}
}

func readHeaders(t *testing.T, raw []byte) []header {
	t.Helper()
	var out []header
	err := imagespec.EachTarEntry(bytes.NewReader(raw), func(hdr *tar.Header, tr *tar.Reader) error {
		data, err := io.ReadAll(tr)
		out = append(out, header{Name: hdr.Name, Typeflag: hdr.Typeflag, Mode: hdr.Mode,
			UID: hdr.Uid, GID: hdr.Gid, ModTime: hdr.ModTime.UTC(), Data: string(data)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
