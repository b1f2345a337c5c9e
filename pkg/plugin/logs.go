package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogsRequest says whose logs to read.
type LogsRequest struct {
	Job       string
	Worker    int // -1 for the launcher
	Container string
	Follow    bool
	Tail      int64 // -1 for all
}

func newLogsCommand(env *Env) *cobra.Command {
	req := LogsRequest{Worker: -1}
	var launcher bool
	cmd := &cobra.Command{
		Use:   "logs NAME [--launcher | --worker I] [-c CONTAINER] [-f] [--tail N]",
		Short: "Print the logs of an MPIJob's launcher or of one of its workers",
		Long: `Print the logs of an MPIJob's launcher (the default) or of its worker of index
I. The container is the launcher's first container, or the workers' main
container (spec.mainContainer, else the first); -c chooses another.`,
		Example: `  kubectl mpijob logs mnist -f
  kubectl mpijob logs mnist --worker 2 --tail 20`,
		Args:              exactlyOneName,
		ValidArgsFunction: completeJobName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if launcher && cmd.Flags().Changed("worker") {
				return fmt.Errorf("give --launcher or --worker, not both")
			}
			if cmd.Flags().Changed("worker") && req.Worker < 0 {
				return fmt.Errorf("--worker must be an index of 0 or more, got %d", req.Worker)
			}
			req.Job = args[0]
			return runLogs(cmd.Context(), env, req)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&launcher, "launcher", false, "the launcher's logs (the default)")
	f.IntVar(&req.Worker, "worker", -1, "the logs of the worker of this index")
	f.StringVarP(&req.Container, "container", "c", "", "the container to read")
	f.BoolVarP(&req.Follow, "follow", "f", false, "keep streaming new lines")
	f.Int64Var(&req.Tail, "tail", -1, "the last N lines only; -1 for all")
	return cmd
}

func runLogs(ctx context.Context, env *Env, req LogsRequest) error {
	c, err := env.Clients()
	if err != nil {
		return err
	}
	job, err := getJob(ctx, c, req.Job)
	if err != nil {
		return err
	}
	pod, err := findInstance(ctx, c, job, req.Worker)
	if err != nil {
		return err
	}
	container, err := LogContainer(c.API, job, pod, req.Container)
	if err != nil {
		return err
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: req.Follow}
	if req.Tail >= 0 {
		opts.TailLines = &req.Tail
	}
	stream, err := c.Kube.CoreV1().Pods(c.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of pod %s, container %s: %w", pod.Name, container, err)
	}
	defer stream.Close()
	if _, err := io.Copy(env.Out, stream); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the logs of pod %s: %w", pod.Name, err)
	}
	return nil
}

// findInstance returns the job's launcher (worker -1) or its worker of
// that index.
func findInstance(ctx context.Context, c *Clients, job *Job, worker int) (*corev1.Pod, error) {
	if worker < 0 {
		return launcherPod(ctx, c, job.Name)
	}
	pods, err := c.Kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: c.API.LabelJobName + "=" + job.Name + "," + c.API.LabelRole + "=" + roleWorker,
	})
	if err != nil {
		return nil, err
	}
	var indices []string
	for i := range pods.Items {
		idx, ok := WorkerIndex(c.API, job.Name, &pods.Items[i])
		if ok && idx == worker {
			return &pods.Items[i], nil
		}
		if ok {
			indices = append(indices, strconv.Itoa(idx))
		}
	}
	return nil, fmt.Errorf("mpijob %q has no worker of index %d (its workers' indices: %s)", job.Name, worker, joinNames(indices))
}

// LogContainer is the container whose logs to read: the one asked for, or
// the pod's main one (for a worker, the job's mainContainer when it names
// one; else the first).
func LogContainer(api API, job *Job, pod *corev1.Pod, asked string) (string, error) {
	var names []string
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			names = append(names, c.Name)
		}
	}
	want := asked
	if want == "" && pod.Labels[api.LabelRole] == roleWorker {
		want = job.Spec.MainContainer
	}
	if want == "" && len(pod.Spec.Containers) > 0 {
		want = pod.Spec.Containers[0].Name
	}
	for _, n := range names {
		if n == want {
			return want, nil
		}
	}
	return "", fmt.Errorf("pod %s has no container %q (its containers: %s)", pod.Name, want, joinNames(names))
}

func newDeleteCommand(env *Env) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an MPIJob",
		Long: `Delete an MPIJob; the garbage collector deletes its pods, ConfigMap and
RBAC objects after it. With --wait (the default) the command returns once the
MPIJob itself is gone.`,
		Example:           `  kubectl mpijob delete mnist`,
		Args:              exactlyOneName,
		ValidArgsFunction: completeJobName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDelete(cmd.Context(), env, args[0], wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the MPIJob is gone")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long --wait waits")
	return cmd
}

func runDelete(ctx context.Context, env *Env, name string, waitGone bool, timeout time.Duration) error {
	c, err := env.Clients()
	if err != nil {
		return err
	}
	jobs := c.jobs(c.Namespace)
	err = jobs.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return notFound(c, name)
	}
	if err != nil {
		return err
	}
	if waitGone {
		err := poll(ctx, env, timeout, func(ctx context.Context) (bool, error) {
			_, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return fmt.Errorf("waiting for mpijob %q to be gone: %w", name, err)
		}
	}
	fmt.Fprintf(env.Out, "mpijob.kubeflow.org %q deleted\n", name)
	return nil
}
