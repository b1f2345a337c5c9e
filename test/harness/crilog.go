package harness

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// CRITime is how container runtimes write a log line's time, and how
// kubectl logs --timestamps shows it: RFC 3339 with all nine digits of the
// nanoseconds (time.RFC3339Nano drops trailing zeros).
const CRITime = "2006-01-02T15:04:05.000000000Z07:00"

// AppendCRILog appends text to path as a container runtime writes a
// container's log, in the CRI format that kubelets (and kwok, for the file
// a kwok.x-k8s.io Logs object names) read: one "<time> <stream> F <line>"
// per line of text, stream being "stdout" or "stderr". It returns the time
// written.
func AppendCRILog(path, stream, text string) (string, error) {
	at := time.Now().UTC().Format(CRITime)
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(&b, "%s %s F %s\n", at, stream, line)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return at, err
}
