package main

import "fmt"

// fmtMiB prints a size in bytes as MiB with one decimal.
func fmtMiB(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
