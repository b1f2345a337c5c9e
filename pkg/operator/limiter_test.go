package operator

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// TestUrgentRequestsHaveABudgetOfTheirOwn: with the plain budget spent, a
// plain request waits for the next token while an urgent sync's goes at
// once.
func TestUrgentRequestsHaveABudgetOfTheirOwn(t *testing.T) {
	l := newByPriority(1, 2)
	defer l.Stop()
	plain := context.Background()
	for range 2 {
		if err := l.Wait(plain); err != nil {
			t.Fatal(err)
		}
	}
	urgent := urgentContext(t)
	start := time.Now()
	for range 2 {
		if err := l.Wait(urgent); err != nil {
			t.Fatal(err)
		}
	}
	if waited := time.Since(start); waited > 100*time.Millisecond {
		t.Errorf("urgent requests waited %s behind the plain ones", waited)
	}
	short, cancel := context.WithTimeout(plain, 100*time.Millisecond)
	defer cancel()
	if err := l.Wait(short); err == nil {
		t.Error("a plain request went through with its budget spent")
	}
}

// urgentContext is the context of an urgent key's sync, as the queue makes
// it.
func urgentContext(t *testing.T) context.Context {
	t.Helper()
	q := reconcile.NewQueue()
	defer q.ShutDown()
	reconcile.AddUrgent(q, "ns/job")
	var ctx context.Context
	reconcile.ProcessNext(context.Background(), q, reconcile.NewHealth(clock.RealClock{}, q.Len), func(c context.Context, _ string) (time.Duration, error) {
		ctx = c
		return 0, nil
	})
	if !reconcile.Urgent(ctx) {
		t.Fatal("the sync of an urgent key is not urgent")
	}
	return ctx
}

// TestKubeClientLimitsByPriority: the controller's client gets the limiter
// of two budgets; the others keep client-go's own.
func TestKubeClientLimitsByPriority(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 10, Burst: 20}
	cs, err := NewKubeClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	limiter := func(c rest.Interface) any { return c.(*rest.RESTClient).GetRateLimiter() }
	if _, ok := limiter(cs.Kube.CoreV1().RESTClient()).(*byPriority); !ok {
		t.Error("the controller's client has no budget for urgent syncs")
	}
	for name, c := range map[string]rest.Interface{"events": cs.Events.CoreV1().RESTClient(), "creations": cs.Creations.CoreV1().RESTClient()} {
		if _, ok := limiter(c).(*byPriority); ok {
			t.Errorf("the %s client shares the controller's limiter", name)
		}
	}
}
