package operator

import (
	"context"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// byPriority is a client's rate limit with two budgets of the same size:
// the requests of urgent syncs (reconcile.Urgent) spend one, all others the
// other. A burst of new jobs then never queues the write that lists a
// running worker behind its own writes in the client.
type byPriority struct{ plain, urgent flowcontrol.RateLimiter }

func newByPriority(qps float32, burst int) *byPriority {
	return &byPriority{
		plain:  flowcontrol.NewTokenBucketRateLimiter(qps, burst),
		urgent: flowcontrol.NewTokenBucketRateLimiter(qps, burst),
	}
}

func (l *byPriority) of(ctx context.Context) flowcontrol.RateLimiter {
	if reconcile.Urgent(ctx) {
		return l.urgent
	}
	return l.plain
}

// Wait waits for a token of the budget of ctx's sync.
func (l *byPriority) Wait(ctx context.Context) error { return l.of(ctx).Wait(ctx) }

// TryAccept, Accept and QPS are the plain budget's: client-go calls Wait.
func (l *byPriority) TryAccept() bool { return l.plain.TryAccept() }
func (l *byPriority) Accept()         { l.plain.Accept() }
func (l *byPriority) QPS() float32    { return l.plain.QPS() }

func (l *byPriority) Stop() {
	l.plain.Stop()
	l.urgent.Stop()
}

var _ flowcontrol.RateLimiter = &byPriority{}
