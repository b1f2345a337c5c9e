package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAppendCRILog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.log")
	writes := []struct {
		stream, text string
	}{
		{"stdout", "rank 0 of 2\nrank 1 of 2\n"},
		{"stderr", "one line, no newline"},
		{"stdout", "a line\n\nafter an empty one"},
	}
	var want []string
	for _, w := range writes {
		before := time.Now()
		at, err := AppendCRILog(path, w.stream, w.text)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatalf("time %q: %v", at, err)
		}
		if at != parsed.UTC().Format(CRITime) || parsed.Before(before) {
			t.Errorf("time %q: want UTC, nine fractional digits, not before %s", at, before.UTC().Format(CRITime))
		}
		for _, line := range strings.Split(strings.TrimRight(w.text, "\n"), "\n") {
			want = append(want, at+" "+w.stream+" F "+line)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Join(want, "\n")+"\n", string(got)); diff != "" {
		t.Errorf("log file (-want +got):\n%s", diff)
	}
}

func TestAppendCRILogMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "c.log")
	if _, err := AppendCRILog(path, "stdout", "x"); !os.IsNotExist(err) {
		t.Errorf("AppendCRILog into a missing directory: %v, want a not-exist error", err)
	}
}
