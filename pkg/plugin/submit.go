package plugin

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
)

func newSubmitCommand(env *Env) *cobra.Command {
	var (
		req          JobRequest
		drainSeconds int32
		dryRun       string
	)
	printFlags := genericclioptions.NewPrintFlags("created").WithTypeSetter(scheme.Scheme)
	cmd := &cobra.Command{
		Use:   "submit NAME --image IMAGE --workers N [flags] -- COMMAND [ARGS...]",
		Short: "Submit an elastic Horovod MPIJob",
		Long: `Submit an elastic Horovod MPIJob.

The launcher runs horovodrun with -np, --min-np and --max-np set to --workers,
--min-workers and --max-workers times --slots, and with the operator's
discovery script (` + DiscoverHostsPath + `), so that Horovod follows the
workers as the job is scaled; --blacklist-cooldown-range lets a worker that
failed once come back. Each worker gets --gpus ` + string(ResourceGPU) + ` and
--cpu and --memory as requests and limits, the launcher --launcher-cpu and
--launcher-memory. What the flags leave open (container names,
cleanPodPolicy, the elastic policy's bounds and drain) is set as the Python
SDK's elastic_horovod_job sets it: docs/job-defaults.md lists the values.

--env, --volume, --node-selector, --toleration and --image-pull-secret go
into the launcher's pod and the workers' alike; --label and --annotation go
on the job and on both pods.

A kubeflow.org/v2beta1 job reaches its workers over SSH: their container
runs sshd in the foreground (` + strings.Join(SSHDArgs, " ") + `),
so the image must have sshd and ssh-keygen, as horovod's images do.`,
		Example: `  # Four workers of one GPU each, elastic between 2 and 8
  kubectl mpijob submit mnist --image horovod/horovod:0.28.1 --workers 4 --min-workers 2 --max-workers 8 --gpus 1 \
    -- python /horovod/examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py

  # Data from a PersistentVolumeClaim, on the nodes of a pool, with a variable
  kubectl mpijob submit resnet --image registry.example/resnet:1 --workers 4 --gpus 8 \
    --volume pvc:imagenet:/data:ro --node-selector pool=gpu --toleration nvidia.com/gpu:NoSchedule \
    --env NCCL_DEBUG=INFO --label team=vision -- python train.py --data /data

  # Print the job instead of creating it
  kubectl mpijob submit mnist --image horovod/horovod:0.28.1 --workers 2 --dry-run=client -o yaml -- python train.py`,
		Args: func(cmd *cobra.Command, args []string) error {
			// NAME before --, or NAME alone (the command's absence is
			// reported with the other checks of the request).
			atDash := cmd.ArgsLenAtDash()
			if atDash != 1 && (atDash != -1 || len(args) != 1) {
				return fmt.Errorf("submit takes one job name before --, and the training command after it")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name, req.Command = args[0], args[1:]
			if cmd.Flags().Changed("drain-seconds") {
				req.DrainSeconds = &drainSeconds
			}
			return runSubmit(cmd, env, req, dryRun, printFlags)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Image, "image", "", "image of the launcher and the workers (required)")
	f.Int32Var(&req.Workers, "workers", 1, "workers to start with")
	f.Int32Var(&req.MinWorkers, "min-workers", 0, "fewest workers the job runs with (default 1)")
	f.Int32Var(&req.MaxWorkers, "max-workers", 0, "most workers the job may scale out to (default --workers)")
	f.Int64Var(&req.GPUs, "gpus", 0, "nvidia.com/gpu per worker")
	f.Int32Var(&req.Slots, "slots", 0, "processes per worker (default --gpus, or 1)")
	f.StringVar(&req.CPU, "cpu", "", "CPU per worker, such as 2 or 500m")
	f.StringVar(&req.Memory, "memory", "", "memory per worker, such as 4Gi")
	f.StringVar(&req.LauncherCPU, "launcher-cpu", "", "CPU of the launcher, such as 1 or 500m")
	f.StringVar(&req.LauncherMemory, "launcher-memory", "", "memory of the launcher, such as 2Gi")
	f.StringArrayVar(&req.Env, "env", nil, "KEY=VALUE variable of the launcher's and the workers' containers; repeat for more")
	f.StringArrayVar(&req.Volumes, "volume", nil, "TYPE:SOURCE:PATH[:ro] volume of the launcher and the workers, TYPE:SOURCE one of pvc:CLAIM, hostpath:/DIR, configmap:NAME, mounted at PATH; repeat for more")
	f.StringArrayVar(&req.NodeSelector, "node-selector", nil, "KEY=VALUE node label the launcher and the workers need; repeat for more")
	f.StringArrayVar(&req.Tolerations, "toleration", nil, "KEY[=VALUE][:EFFECT] taint the launcher and the workers tolerate (any value without =VALUE, any effect without :EFFECT); repeat for more")
	f.StringArrayVar(&req.ImagePullSecrets, "image-pull-secret", nil, "Secret of the namespace to pull the image with; repeat for more")
	f.StringArrayVar(&req.Labels, "label", nil, "KEY=VALUE label of the job and of its pods; repeat for more")
	f.StringArrayVar(&req.Annotations, "annotation", nil, "KEY=VALUE annotation of the job and of its pods; repeat for more")
	f.Int32Var(&drainSeconds, "drain-seconds", jobDefaults.ElasticPolicy.DrainSeconds, "how long a removed worker stays out of discover_hosts.sh before its pod is deleted")
	f.StringVar(&dryRun, "dry-run", "none", `"none", "client" (print the job without sending it) or "server" (send it without persisting it)`)
	printFlags.AddFlags(cmd)
	return cmd
}

func runSubmit(cmd *cobra.Command, env *Env, req JobRequest, dryRun string, printFlags *genericclioptions.PrintFlags) error {
	if dryRun != "none" && dryRun != "client" && dryRun != "server" {
		return fmt.Errorf(`invalid --dry-run %q: must be "none", "client" or "server"`, dryRun)
	}
	if dryRun != "none" {
		if err := printFlags.Complete("%s (" + dryRun + " dry run)"); err != nil {
			return err
		}
	}
	// A format the printers do not know is refused before the job is sent.
	printer, err := printFlags.ToPrinter()
	if err != nil {
		return err
	}
	c, err := env.Clients()
	if err != nil {
		return err
	}
	req.Namespace = c.Namespace
	job, err := buildObject(c.API, req)
	if err != nil {
		return err
	}
	if dryRun != "client" {
		opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
		if dryRun == "server" {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if job, err = c.jobs(c.Namespace).Create(cmd.Context(), job, opts); err != nil {
			return err
		}
	}
	return printer.PrintObj(job, env.Out)
}
