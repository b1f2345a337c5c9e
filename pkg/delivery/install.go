package delivery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"
)

// InstallExecutable copies the regular file src to dst with mode 0755.
//
// The copy is written to a temporary file in dst's directory and renamed
// into place, so a reader of dst never sees a partly written binary. The
// directory is created if it does not exist. It returns the number of bytes
// copied.
func InstallExecutable(ctx context.Context, src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, fmt.Errorf("opening source binary: %w", err)
	}
	defer in.Close()

	info, err := in.Stat()
	if err != nil {
		return 0, fmt.Errorf("inspecting source binary: %w", err)
	}
	if !info.Mode().IsRegular() {
		return 0, fmt.Errorf("source binary %s is not a regular file (mode %v)", src, info.Mode())
	}

	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("creating target directory: %w", err)
	}

	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".partial-*")
	if err != nil {
		return 0, fmt.Errorf("creating temporary file in %s: %w", dir, err)
	}
	tmpName := tmp.Name()
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()

	n, err := io.Copy(tmp, in)
	if err != nil {
		return 0, fmt.Errorf("copying %s to %s: %w", src, tmpName, err)
	}
	// Set the mode explicitly: CreateTemp uses 0600 and the umask would
	// otherwise get a say.
	if err := tmp.Chmod(0o755); err != nil {
		return 0, fmt.Errorf("making %s executable: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return 0, fmt.Errorf("flushing %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("closing %s: %w", tmpName, err)
	}
	if err := os.Rename(tmpName, dst); err != nil {
		_ = os.Remove(tmpName)
		done = true
		return 0, fmt.Errorf("moving %s into place: %w", dst, err)
	}
	done = true

	klog.FromContext(ctx).Info("Installed executable", "source", src, "target", dst, "bytes", n)
	return n, nil
}

// InstallKubectl copies the configured kubectl binary into the target
// directory.
func InstallKubectl(ctx context.Context, cfg Config) error {
	if cfg.KubectlSource == "" || cfg.TargetDir == "" {
		return errors.New("kubectl source and target directory must be set")
	}
	_, err := InstallExecutable(ctx, cfg.KubectlSource, cfg.KubectlTarget())
	if err != nil {
		return fmt.Errorf("installing kubectl: %w", err)
	}
	return nil
}
