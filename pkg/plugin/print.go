package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
)

// PrintJobs writes the table of `list`: one row per job; wide adds the
// elastic bounds, allNamespaces the namespace.
func PrintJobs(out io.Writer, views []JobView, wide, allNamespaces bool) error {
	w := printers.GetNewTabWriter(out)
	header := []string{"NAME", "STATUS", "DESIRED", "RUNNING", "LISTED", "DURATION"}
	if wide {
		header = append(header, "MIN", "MAX")
	}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	writeRow(w, header)
	for _, v := range views {
		row := append([]string{v.Name, v.Status}, v.workerCounts()...)
		row = append(row, HumanDuration(v.Duration))
		if wide {
			row = append(row, bound(v.Min), bound(v.Max))
		}
		if allNamespaces {
			row = append([]string{v.Namespace}, row...)
		}
		writeRow(w, row)
	}
	return w.Flush()
}

// PrintJob writes what `get` shows: the summary, then a row per instance;
// wide adds each pod's IP and, for a pod not Running, the latest reason
// the scheduler gave (reasons maps pod names to it).
func PrintJob(out io.Writer, v JobView, wide bool, reasons map[string]string) error {
	w := printers.GetNewTabWriter(out)
	bounds := ""
	if v.Max > 0 {
		bounds = fmt.Sprintf(" (min %d, max %d)", v.Min, v.Max)
	}
	fmt.Fprintf(w, "Name:\t%s\n", v.Name)
	fmt.Fprintf(w, "Namespace:\t%s\n", v.Namespace)
	fmt.Fprintf(w, "Status:\t%s\n", v.Status)
	fmt.Fprintf(w, "Duration:\t%s\n", HumanDuration(v.Duration))
	fmt.Fprintf(w, "Workers:\tdesired %d, running %d, listed %d%s\n", v.Desired, v.Running, v.Listed, bounds)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	header := []string{"INSTANCE", "ROLE", "PHASE", "NODE", "LISTED", "DRAINING SINCE", "GPUS", "RESTARTS", "AGE"}
	if wide {
		header = append(header, "IP", "REASON")
	}
	writeRow(w, header)
	for _, in := range v.Instances {
		row := []string{
			in.Name, in.Role, in.Phase, orDash(in.Node), yesNo(in.Listed), orDash(in.DrainingSince),
			strconv.FormatInt(in.GPUs, 10), strconv.Itoa(int(in.Restarts)), HumanDuration(in.Age),
		}
		if wide {
			row = append(row, orDash(in.IP), orDash(reasons[in.Name]))
		}
		writeRow(w, row)
	}
	return w.Flush()
}

func writeRow(w io.Writer, cells []string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func bound(n int32) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(int(n))
}
