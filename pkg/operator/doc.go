// Package operator holds the process plumbing that the operator binaries
// share, whatever API version their controller serves:
//
//   - flags: klog's flags registered once (KlogFlags), and ParseFlags, which
//     accepts the single-dash long flags of Go's flag package (GoStyleArgs)
//     so that command lines written for upstream's operator keep working;
//   - the client configuration: BuildRestConfig (in-cluster, or from a
//     kubeconfig and a master URL) and ServedResources, for start-up checks
//     that a CRD is installed;
//   - monitoring: /metrics (the pkg/metrics registry plus the Go runtime and
//     process collectors) and /healthz, which asks the running controller
//     (NewMonitoringHandler, StartMonitoring, RunningController);
//   - leader election: an Elector that runs a function only while this
//     replica holds a Lease, releases the Lease only once that function has
//     returned, and exits the process when the Lease is lost;
//   - Serve, which runs a controller function with or without leader
//     election and the monitoring server, and SignalContext, which turns
//     SIGTERM and SIGINT into a graceful stop.
//
// A binary parses its own flags with ParseFlags, builds its clients from
// BuildRestConfig, checks its CRDs, and hands its controller to Serve under
// a context from SignalContext.
package operator
