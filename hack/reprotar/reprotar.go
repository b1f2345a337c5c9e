// Package reprotar writes gzip-compressed tar archives reproducibly: the
// same files give the same bytes whoever builds them, wherever and
// whenever. Entries are sorted by name, owned by uid and gid 0 without user
// or group names, modified at one fixed time (SOURCE_DATE_EPOCH), and
// their modes reduced to 0644 or 0755; the gzip header carries neither a
// file name nor a time.
package reprotar

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// File is one entry of an archive. A Name ending in "/" is a directory,
// and has no Data.
type File struct {
	Name string
	// Executable makes a file's mode 0755 rather than 0644.
	Executable bool
	Data       []byte
}

// IsDir tells whether f is a directory.
func (f File) IsDir() bool { return strings.HasSuffix(f.Name, "/") }

// header is f's tar header, with nothing of the machine that made it.
func (f File) header(mtime time.Time) *tar.Header {
	hdr := &tar.Header{Name: f.Name, Mode: 0o644, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(f.Data))}
	if f.IsDir() {
		hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
	} else if f.Executable {
		hdr.Mode = 0o755
	}
	return hdr
}

// Write writes files to w as a .tar.gz, sorted by name, every entry
// modified at mtime.
func Write(w io.Writer, files []File, mtime time.Time) error {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Name == sorted[i-1].Name {
			return fmt.Errorf("%s: twice in the archive", sorted[i].Name)
		}
	}
	// A zero gzip.Header: no name, no modification time.
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, f := range sorted {
		if err := tw.WriteHeader(f.header(mtime.UTC())); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// Read reads the regular files and directories of the .tar.gz r. Links
// and devices are refused: nothing the project archives has them, and
// Write could not keep them.
func Read(r io.Reader) ([]File, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var files []File
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, zr.Close()
		}
		if err != nil {
			return nil, err
		}
		f, err := readEntry(tr, hdr)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
}

func readEntry(tr *tar.Reader, hdr *tar.Header) (File, error) {
	switch hdr.Typeflag {
	case tar.TypeDir:
		return File{Name: strings.TrimSuffix(hdr.Name, "/") + "/"}, nil
	case tar.TypeReg:
		data, err := io.ReadAll(tr)
		return File{Name: hdr.Name, Executable: hdr.Mode&0o111 != 0, Data: data}, err
	default:
		return File{}, fmt.Errorf("%s: entry type %q is neither a file nor a directory", hdr.Name, hdr.Typeflag)
	}
}

// Normalize rewrites the .tar.gz r to w as Write writes it: the same
// names, contents and executable bits, in order, with times, owners and
// compression of no particular machine.
func Normalize(r io.Reader, w io.Writer, mtime time.Time) error {
	files, err := Read(r)
	if err != nil {
		return err
	}
	return Write(w, files, mtime)
}
