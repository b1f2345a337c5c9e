// Command freeports prints free ports of 127.0.0.1, claimed through
// test/harness for a process that outlives it (a script's $$), so that a
// shell script picks its ports where the Go suites pick theirs:
//
//	read -r a b < <(go run ./hack/freeports --for $$ 2)
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kubeflow/mpi-operator/test/harness"
)

func main() {
	owner := flag.Int("for", os.Getppid(), "the process that holds the ports until it exits")
	flag.Parse()
	n, err := strconv.Atoi(flag.Arg(0))
	if err != nil || flag.NArg() != 1 || n < 1 {
		fmt.Fprintln(os.Stderr, "usage: freeports [--for PID] N")
		os.Exit(2)
	}
	ports, err := harness.ClaimPorts(*owner, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "freeports:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Trim(fmt.Sprint(ports), "[]"))
}
