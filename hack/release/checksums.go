package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checksumsFile lists the sha256 of every other file of the release, in
// the format of sha256sum (`sha256sum -c checksums.txt` checks them).
const checksumsFile = "checksums.txt"

// writeChecksums writes checksumsFile over every other file of dir, by
// name.
func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range entries {
		if e.Name() == checksumsFile {
			continue
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file; a release holds only files", filepath.Join(dir, e.Name()))
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+e.Name()+"\n")
	}
	// os.ReadDir returns the entries by name: the lines' order.
	return os.WriteFile(filepath.Join(dir, checksumsFile), []byte(strings.Join(lines, "")), 0o644)
}
