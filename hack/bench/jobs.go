package main

import (
	"context"

	"k8s.io/client-go/util/retry"
)

// scaleJob sets a job's worker replicas through the scale subresource, as
// `kubectl scale` does, retrying on conflicts with the operator's status
// writes.
func scaleJob(ctx context.Context, o *options, c *cluster, ns, name string, replicas int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return o.api.Scale(ctx, c.Dynamic, ns, name, replicas)
	})
}
