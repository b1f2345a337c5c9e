package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// sample is a set of durations of one measure.
type sample []time.Duration

// summary is what the report prints of a sample.
type summary struct {
	N             int
	P50, P99, Max time.Duration
}

// percentile is the nearest-rank percentile of a sorted sample: the
// smallest value that at least p percent of the values do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func (s sample) summarize() summary {
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	sum := summary{N: len(sorted)}
	if len(sorted) > 0 {
		sum.P50 = percentile(sorted, 50)
		sum.P99 = percentile(sorted, 99)
		sum.Max = sorted[len(sorted)-1]
	}
	return sum
}

// fmtDur prints a latency the way the tables show it: milliseconds below a
// second, seconds with two decimals above.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 100*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
}

// fmtMiB prints a size in bytes as MiB with one decimal.
func fmtMiB(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// table builds a markdown table.
type table struct {
	header []string
	rows   [][]string
}

func newTable(header ...string) *table { return &table{header: header} }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" ")
			b.WriteString(strings.ReplaceAll(c, "|", `\|`))
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	line(t.header)
	sep := make([]string, len(t.header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}
