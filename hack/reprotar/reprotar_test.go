package reprotar

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var epoch = time.Unix(1700000000, 0)

// machineArchive is a .tar.gz as a tool of the build machine writes one:
// unsorted, owned by a user, with times and a gzip header of its own.
func machineArchive(t *testing.T, when time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Name, zw.ModTime = "pkg.tar", when
	tw := tar.NewWriter(zw)
	for _, h := range []struct {
		name string
		mode int64
		data string
		dir  bool
	}{
		{"pkg/setup.cfg", 0o664, "[x]\n", false},
		{"pkg/", 0o775, "", true},
		{"pkg/run.sh", 0o775, "#!/bin/sh\n", false},
	} {
		hdr := &tar.Header{Name: h.name, Mode: h.mode, Size: int64(len(h.data)), ModTime: when,
			Uid: 1000, Gid: 1000, Uname: "dev", Gname: "dev", Typeflag: tar.TypeReg}
		if h.dir {
			hdr.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(h.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func normalize(t *testing.T, in []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := Normalize(bytes.NewReader(in), &out, epoch); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestNormalize checks that two archives of the same files made at
// different times normalise to the same bytes, and what those hold.
func TestNormalize(t *testing.T) {
	a := normalize(t, machineArchive(t, time.Unix(1800000000, 0)))
	b := normalize(t, machineArchive(t, time.Unix(1800000999, 0)))
	if !bytes.Equal(a, b) {
		t.Fatal("the same files at other times normalised to other bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header: name %q, time %v; want neither", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	type entry struct {
		Name         string
		Mode         int64
		Uid, Gid     int
		Uname, Gname string
		ModTime      time.Time
	}
	var got []entry
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		got = append(got, entry{hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.ModTime})
	}
	want := []entry{
		{Name: "pkg/", Mode: 0o755, ModTime: epoch},
		{Name: "pkg/run.sh", Mode: 0o755, ModTime: epoch},
		{Name: "pkg/setup.cfg", Mode: 0o644, ModTime: epoch},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestWriteRefusesDuplicates(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []File{{Name: "a", Data: []byte("1")}, {Name: "a", Data: []byte("2")}}, epoch)
	if err == nil {
		t.Fatal("two entries named a were written")
	}
}

func TestReadRefusesLinks(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}); err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	_ = zw.Close()
	if _, err := Read(&buf); err == nil {
		t.Fatal("a symbolic link was read as a file")
	}
}
