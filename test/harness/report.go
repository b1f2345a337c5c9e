package harness

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Sample is a set of durations of one measure.
type Sample []time.Duration

// Summary is what a report prints of a sample.
type Summary struct {
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

// Summarize returns the count, median, 99th percentile and maximum.
func (s Sample) Summarize() Summary {
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	sum := Summary{N: len(sorted)}
	if len(sorted) > 0 {
		sum.P50 = percentile(sorted, 50)
		sum.P99 = percentile(sorted, 99)
		sum.Max = sorted[len(sorted)-1]
	}
	return sum
}

// FmtDur prints a duration the way the tables show it: milliseconds below
// a second, seconds with two decimals below 100 s, whole seconds above.
func FmtDur(d time.Duration) string {
	switch {
	case d == math.MinInt64:
		// Its negation overflows: a difference of times that saturated.
		return "-" + FmtDur(math.MaxInt64)
	case d < 0:
		return "-" + FmtDur(-d)
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 100*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
}

// Table builds a markdown table.
type Table struct {
	header []string
	rows   [][]string
}

// NewTable starts a table with its header cells.
func NewTable(header ...string) *Table { return &Table{header: header} }

// Add appends a row.
func (t *Table) Add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *Table) String() string {
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

// ShortList joins up to eight names, and says how many more there are.
func ShortList(names []string) string {
	const n = 8
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

// CountOf prints "0", or the count and the first names.
func CountOf(names []string) string {
	if len(names) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d: %s", len(names), ShortList(names))
}
