package plugin

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
)

// outputFlags are -o of list and get: wide, or a printer of cli-runtime
// (yaml, json, name, jsonpath, ...) for the MPIJob objects themselves.
type outputFlags struct {
	print *genericclioptions.PrintFlags
}

func newOutputFlags(cmd *cobra.Command) *outputFlags {
	o := &outputFlags{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme)}
	o.print.AddFlags(cmd)
	cmd.Flag("output").Usage = "output format: wide, or one of " + fmt.Sprint(o.print.AllowedFormats())
	return o
}

// table tells whether the output is the plugin's own table, and wide.
func (o *outputFlags) table() (table, wide bool) {
	format := *o.print.OutputFormat
	return format == "" || format == "wide", format == "wide"
}

// check refuses a format that no printer knows, before anything is read.
func (o *outputFlags) check() error {
	if table, _ := o.table(); table {
		return nil
	}
	_, err := o.print.ToPrinter()
	return err
}

// printObject prints obj with the chosen cli-runtime printer.
func (o *outputFlags) printObject(obj runtime.Object, out io.Writer) error {
	p, err := o.print.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(obj, out)
}

// printList prints a list of jobs as served: item by item for -o name,
// which prints no lists, whole otherwise.
func (o *outputFlags) printList(jobs *unstructured.UnstructuredList, out io.Writer) error {
	if *o.print.OutputFormat != "name" {
		return o.printObject(jobs, out)
	}
	for i := range jobs.Items {
		if err := o.printObject(&jobs.Items[i], out); err != nil {
			return err
		}
	}
	return nil
}

func newListCommand(env *Env) *cobra.Command {
	var allNamespaces bool
	var out *outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List MPIJobs with their status and workers",
		Long: `List MPIJobs: status, desired workers, running workers, workers listed in
discover_hosts.sh, and how long each has run.`,
		Example: `  kubectl mpijob list
  kubectl mpijob list -A -o wide
  kubectl mpijob list -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd.Context(), env, out, allNamespaces)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the jobs of every namespace")
	out = newOutputFlags(cmd)
	return cmd
}

func runList(ctx context.Context, env *Env, out *outputFlags, allNamespaces bool) error {
	if err := out.check(); err != nil {
		return err
	}
	c, err := env.Clients()
	if err != nil {
		return err
	}
	ns := c.Namespace
	if allNamespaces {
		ns = metav1.NamespaceAll
	}
	list, jobs, err := listJobs(ctx, c, ns)
	if err != nil {
		return err
	}
	if table, _ := out.table(); !table {
		return out.printList(list, env.Out)
	}
	if len(jobs) == 0 {
		fmt.Fprintf(env.ErrOut, "No MPIJobs found in %s.\n", namespaceText(ns))
		return nil
	}
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: c.API.LabelJobName})
	if err != nil {
		return err
	}
	cms, err := c.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	views := make([]JobView, 0, len(jobs))
	now := env.Now()
	for _, job := range jobs {
		views = append(views, View(snapshotOf(c.API, job, pods.Items, cms.Items), now))
	}
	_, wide := out.table()
	return PrintJobs(env.Out, views, wide, allNamespaces)
}

func namespaceText(ns string) string {
	if ns == metav1.NamespaceAll {
		return "any namespace"
	}
	return fmt.Sprintf("namespace %q", ns)
}

// snapshotOf picks a job's pods and discovery script out of lists that may
// hold other jobs' too.
func snapshotOf(api API, job *Job, pods []corev1.Pod, cms []corev1.ConfigMap) Snapshot {
	s := Snapshot{API: api, Job: job}
	for _, p := range pods {
		if p.Namespace == job.Namespace && p.Labels[api.LabelJobName] == job.Name {
			s.Pods = append(s.Pods, p)
		}
	}
	for _, cm := range cms {
		if cm.Namespace == job.Namespace && cm.Name == ConfigMapName(job.Name) {
			s.Hosts = cm.Data[discoverHostsKey]
		}
	}
	return s
}

// readSnapshot reads one job, its pods and its discovery script.
func readSnapshot(ctx context.Context, c *Clients, name string) (Snapshot, error) {
	job, err := getJob(ctx, c, name)
	if err != nil {
		return Snapshot{}, err
	}
	pods, err := c.Kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: c.API.LabelJobName + "=" + name})
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{API: c.API, Job: job, Pods: pods.Items}
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, ConfigMapName(name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return Snapshot{}, err
	default:
		s.Hosts = cm.Data[discoverHostsKey]
	}
	return s, nil
}

func newGetCommand(env *Env) *cobra.Command {
	var watch bool
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show an MPIJob and each of its instances",
		Long: `Show an MPIJob: its status, how long it has run, its desired, running and
listed workers, then one row per instance (the launcher and each worker) with
its phase, node, whether discover_hosts.sh lists it, since when it drains,
its GPUs, restarts and age. -o wide adds each pod's IP and, for a pod that
is not running, the scheduler's latest reason. With --watch the view is
printed again on every change until the job is deleted or you interrupt it.`,
		Example: `  kubectl mpijob get mnist
  kubectl mpijob get mnist -o wide --watch
  kubectl mpijob get mnist -o yaml`,
		Args:              exactlyOneName,
		ValidArgsFunction: completeJobName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd.Context(), env, out, args[0], watch)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print the job again whenever it or its pods change")
	out = newOutputFlags(cmd)
	return cmd
}

func runGet(ctx context.Context, env *Env, out *outputFlags, name string, watch bool) error {
	if err := out.check(); err != nil {
		return err
	}
	c, err := env.Clients()
	if err != nil {
		return err
	}
	render := func(ctx context.Context) ([]byte, error) { return renderJob(ctx, env, c, out, name) }
	first, err := render(ctx)
	if err != nil || !watch {
		if err == nil {
			_, err = env.Out.Write(first)
		}
		return err
	}
	return watchJob(ctx, env, c, name, first, render)
}

// renderJob returns what get prints of a job now.
func renderJob(ctx context.Context, env *Env, c *Clients, out *outputFlags, name string) ([]byte, error) {
	var b bytes.Buffer
	table, wide := out.table()
	if !table {
		job, err := getJob(ctx, c, name)
		if err != nil {
			return nil, err
		}
		err = out.printObject(job.Object, &b)
		return b.Bytes(), err
	}
	s, err := readSnapshot(ctx, c, name)
	if err != nil {
		return nil, err
	}
	v := View(s, env.Now())
	var reasons map[string]string
	if wide {
		var waiting []string
		for _, in := range v.Instances {
			if in.Phase == string(corev1.PodPending) {
				waiting = append(waiting, in.Name)
			}
		}
		if reasons, err = schedulingReasons(ctx, c.Kube, c.Namespace, waiting); err != nil {
			return nil, err
		}
	}
	err = PrintJob(&b, v, wide, reasons)
	return b.Bytes(), err
}

// watchJob prints first, then the view again after every change of the
// job, its pods or its ConfigMap that changes what is printed, until the
// job is deleted or ctx ends.
func watchJob(ctx context.Context, env *Env, c *Clients, name string, first []byte, render func(context.Context) ([]byte, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	gone := make(chan struct{})
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if err := startWatches(ctx, c, name, notify, func() { close(gone) }); err != nil {
		return err
	}
	last := first
	if _, err := env.Out.Write(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-gone:
			fmt.Fprintf(env.Out, "\nmpijob %q deleted\n", name)
			return nil
		case <-changed:
		}
		next, err := render(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			// The job may be gone: the deletion ends the watch.
			continue
		case bytes.Equal(next, last):
			continue
		}
		last = next
		if _, err := fmt.Fprintf(env.Out, "\n%s", next); err != nil {
			return err
		}
	}
}

// startWatches starts informers on the job, its pods and its ConfigMap that
// call notify on every change, and deleted once the job is deleted.
func startWatches(ctx context.Context, c *Clients, name string, notify, deleted func()) error {
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	mpi := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, 0, c.Namespace, byName)
	jobs := mpi.ForResource(c.API.GVR()).Informer()
	var once bool
	_, err := jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(obj any) {
			// The field selector keeps other jobs out; a client that
			// ignores it must not end the watch on their deletion.
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, ok := obj.(metav1.Object); ok && m.GetName() != name {
				return
			}
			if !once {
				once = true
				deleted()
			}
		},
	})
	if err != nil {
		return err
	}
	podFactory := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = c.API.LabelJobName + "=" + name }))
	cmFactory := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName(name)).String()
		}))
	for _, inf := range []cache.SharedIndexInformer{podFactory.Core().V1().Pods().Informer(), cmFactory.Core().V1().ConfigMaps().Informer()} {
		if _, err := inf.AddEventHandler(onChange); err != nil {
			return err
		}
	}
	mpi.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	cmFactory.Start(ctx.Done())
	return nil
}
