package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// rollbackWait bounds how long a rolled-back scale-out waits for its new
// workers to leave the job.
const rollbackWait = time.Minute

func newScaleOutCommand(env *Env) *cobra.Command {
	var count int32
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "scale-out NAME --count K [--timeout D]",
		Short: "Add workers to an elastic MPIJob and wait until Horovod can use them",
		Long: `Add K workers to an elastic MPIJob through its scale subresource, and wait
until K new workers are Running and listed in discover_hosts.sh.

If they are not within --timeout, the job is rolled back to its previous
worker count: the operator removes workers that are not Running first, so
the new workers still Pending are the first to go, then (if more must go)
the running workers of the lowest pod-deletion-cost and highest index. The
command then fails, naming each new worker that did not come up and the
scheduler's reason from its events.`,
		Example:           `  kubectl mpijob scale-out mnist --count 2 --timeout 5m`,
		Args:              exactlyOneName,
		ValidArgsFunction: completeJobName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScaleOut(cmd.Context(), env, args[0], count, timeout)
		},
	}
	cmd.Flags().Int32Var(&count, "count", 1, "workers to add")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long the new workers have to be Running and listed before the scale-out is rolled back")
	return cmd
}

func runScaleOut(ctx context.Context, env *Env, name string, count int32, timeout time.Duration) error {
	if count < 1 {
		return fmt.Errorf("--count must be at least 1, got %d", count)
	}
	c, s, err := scaleStart(ctx, env, name, timeout)
	if err != nil {
		return err
	}
	_, hi, _ := bounds(s.Job)
	cur := workerReplicas(s.Job)
	if cur+count > hi {
		return fmt.Errorf("cannot scale out mpijob %q by %d: it has %d workers and maxReplicas %d (it can take %d more)",
			name, count, cur, hi, max(hi-cur, 0))
	}
	before := WorkersOf(s).Names()
	if err := setReplicas(ctx, c, name, cur, cur+count); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "mpijob %q scaling out from %d to %d workers\n", name, cur, cur+count)

	var added, ready []string
	err = poll(ctx, env, timeout, func(ctx context.Context) (bool, error) {
		s, err := readSnapshot(ctx, c, name)
		if err != nil {
			return false, err
		}
		w := WorkersOf(s)
		added = without(w.Names(), before)
		ready = without(w.Ready(), before)
		return len(ready) >= int(count), nil
	})
	if err == nil {
		fmt.Fprintf(env.Out, "mpijob %q scaled out to %d workers: %s Running and listed\n", name, cur+count, joinNames(ready))
		return nil
	}
	if !errors.Is(err, errWaitTimeout) {
		return err
	}
	return rollBack(ctx, env, c, name, cur, count, timeout, len(ready), added)
}

// scaleStart checks a scale command's timeout and reads the elastic job
// it scales.
func scaleStart(ctx context.Context, env *Env, name string, timeout time.Duration) (*Clients, Snapshot, error) {
	if timeout <= 0 {
		return nil, Snapshot{}, fmt.Errorf("--timeout must be positive, got %s", timeout)
	}
	c, err := env.Clients()
	if err != nil {
		return nil, Snapshot{}, err
	}
	s, err := readSnapshot(ctx, c, name)
	if err != nil {
		return nil, Snapshot{}, err
	}
	if _, _, err := bounds(s.Job); err != nil {
		return nil, Snapshot{}, err
	}
	return c, s, nil
}

// rollBack returns a scale-out that timed out to from workers, waits for
// the new workers that did not come up to leave and the job to be back to
// from live workers, and returns the error that tells the story. added are the workers created since the scale-out,
// ready of them were Running and listed.
func rollBack(ctx context.Context, env *Env, c *Clients, name string, from, count int32, timeout time.Duration, ready int, added []string) error {
	s, err := readSnapshot(ctx, c, name)
	if err != nil {
		return err
	}
	stuck := without(added, WorkersOf(s).Ready())
	var removed []string
	reasons, err := schedulingReasons(ctx, c.Kube, c.Namespace, stuck)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scale-out of mpijob %q timed out after %s: %d of %d new workers not Running and listed",
		name, timeout, int(count)-ready, count)
	for _, n := range stuck {
		fmt.Fprintf(&b, "\n  %s: %s", n, orText(reasons[n], "no scheduling event"))
	}
	if err := setReplicas(ctx, c, name, from+count, from); err != nil {
		return fmt.Errorf("%s\nnot rolled back: %w", b.String(), err)
	}
	fmt.Fprintf(env.Out, "mpijob %q: rolling back to %d workers\n", name, from)
	err = poll(ctx, env, rollbackWait, func(ctx context.Context) (bool, error) {
		s, err := readSnapshot(ctx, c, name)
		if err != nil {
			return false, err
		}
		// Rolled back once the stuck workers are gone and the job is
		// back to from live workers: the operator may take the new
		// workers that came up in a later sync than the stuck ones.
		w := WorkersOf(s)
		live := w.Live()
		removed = without(added, live)
		return len(without(stuck, removed)) == 0 && len(live) <= int(from), nil
	})
	if err != nil {
		return fmt.Errorf("%s\nrolled back to %d workers, but the new workers had not left after %s: %w", b.String(), from, rollbackWait, err)
	}
	fmt.Fprintf(&b, "\nrolled back to %d workers; leaving the job: %s", from, joinNames(removed))
	return errors.New(b.String())
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// errWaitTimeout is poll's error when its time is up.
var errWaitTimeout = errors.New("timed out")

// poll calls done every env.Poll until it returns true or an error, or
// timeout passes (errWaitTimeout). The requests done makes run under ctx,
// not under the timeout, so that none is cut short by it.
func poll(ctx context.Context, env *Env, timeout time.Duration, done func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	return wait.PollUntilContextCancel(ctx, env.Poll, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		if !ok && err == nil && !time.Now().Before(deadline) {
			return false, errWaitTimeout
		}
		return ok, err
	})
}

func newScaleInCommand(env *Env) *cobra.Command {
	var count int32
	var pods []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "scale-in NAME (--count K | --pod P[,P...]) [--timeout D]",
		Short: "Remove workers from an elastic MPIJob and wait until they are gone",
		Long: `Remove workers from an elastic MPIJob through its scale subresource, and wait
until the removed workers have left discover_hosts.sh and their pods are
deleted (the operator deletes them drainSeconds after they leave the script).

With --count the operator chooses, as a ReplicaSet does: workers not Running
first, then the lowest pod-deletion-cost, then the highest index. With --pod
the named workers are given a pod-deletion-cost below every other worker's,
so that they are the ones that go.`,
		Example: `  kubectl mpijob scale-in mnist --count 1
  kubectl mpijob scale-in mnist --pod mnist-worker-0,mnist-worker-3 --timeout 2m`,
		Args:              exactlyOneName,
		ValidArgsFunction: completeJobName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("count") == (len(pods) > 0) {
				return fmt.Errorf("give either --count or --pod")
			}
			return runScaleIn(cmd.Context(), env, args[0], count, pods, timeout)
		},
	}
	cmd.Flags().Int32Var(&count, "count", 1, "workers to remove")
	cmd.Flags().StringSliceVar(&pods, "pod", nil, "the workers to remove, by pod name")
	// Registering fails only for an unknown flag or a second function.
	_ = cmd.RegisterFlagCompletionFunc("pod", completeWorkerName(env))
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the removed workers to be gone")
	return cmd
}

func runScaleIn(ctx context.Context, env *Env, name string, count int32, pods []string, timeout time.Duration) error {
	c, s, err := scaleStart(ctx, env, name, timeout)
	if err != nil {
		return err
	}
	lo, _, _ := bounds(s.Job)
	w := WorkersOf(s)
	victims, err := chooseVictims(name, w, pods)
	if err != nil {
		return err
	}
	if victims != nil {
		count = int32(len(victims))
	}
	cur := workerReplicas(s.Job)
	if count < 1 {
		return fmt.Errorf("--count must be at least 1, got %d", count)
	}
	if cur-count < lo {
		return fmt.Errorf("cannot scale in mpijob %q by %d: it has %d workers and minReplicas %d (it can lose %d)",
			name, count, cur, lo, max(cur-lo, 0))
	}
	if err := markVictims(ctx, c, w, victims); err != nil {
		return err
	}
	before := w.Live()
	if err := setReplicas(ctx, c, name, cur, cur-count); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "mpijob %q scaling in from %d to %d workers\n", name, cur, cur-count)
	var removed []string
	err = poll(ctx, env, timeout, func(ctx context.Context) (bool, error) {
		s, err := readSnapshot(ctx, c, name)
		if err != nil {
			return false, err
		}
		w := WorkersOf(s)
		removed = without(before, w.Live())
		return len(removed) >= int(count) && w.Gone(removed), nil
	})
	if err != nil {
		return fmt.Errorf("scale-in of mpijob %q: waiting for %s to leave: %w", name, joinNames(removed), err)
	}
	if victims != nil && !sameNames(removed, victims) {
		return fmt.Errorf("mpijob %q scaled in to %d workers, but the operator removed %s instead of %s",
			name, cur-count, joinNames(removed), joinNames(victims))
	}
	fmt.Fprintf(env.Out, "mpijob %q scaled in to %d workers: %s left discover_hosts.sh and deleted\n", name, cur-count, joinNames(removed))
	return nil
}

// chooseVictims checks the workers named by --pod: each a live worker of
// the job, and no other worker that the operator would take first because
// it is not Running. nil when none are named.
func chooseVictims(job string, w Workers, pods []string) ([]string, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	var victims []string
	for _, n := range pods {
		p, ok := w.Find(n)
		switch {
		case !ok:
			return nil, fmt.Errorf("pod %q is not a worker of mpijob %q (its workers: %s)", n, job, joinNames(w.Names()))
		case !live(p):
			return nil, fmt.Errorf("worker %q of mpijob %q is already leaving", n, job)
		case !slices.Contains(victims, n):
			victims = append(victims, n)
		}
	}
	for i := range w.Pods {
		p := &w.Pods[i]
		if live(p) && p.Status.Phase != corev1.PodRunning && !slices.Contains(victims, p.Name) {
			return nil, fmt.Errorf("worker %q of mpijob %q is %s: the operator removes workers that are not Running first, so it would go instead of %s",
				p.Name, job, p.Status.Phase, joinNames(victims))
		}
	}
	return victims, nil
}

// markVictims gives the victims a pod-deletion-cost below the others'.
func markVictims(ctx context.Context, c *Clients, w Workers, victims []string) error {
	if len(victims) == 0 {
		return nil
	}
	var others []*corev1.Pod
	for i := range w.Pods {
		if live(&w.Pods[i]) && !slices.Contains(victims, w.Pods[i].Name) {
			others = append(others, &w.Pods[i])
		}
	}
	cost, err := VictimCost(others)
	if err != nil {
		return err
	}
	for _, v := range victims {
		if err := setDeletionCost(ctx, c, v, cost); err != nil {
			return fmt.Errorf("marking %s for removal: %w", v, err)
		}
	}
	return nil
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
