// Package upstream writes, as YAML for `kubectl create -f`, MPIJobs and the
// children that the upstream operator leaves in a cluster, so that the
// upgrade tests of both operators (test/e2e and v2/test/e2e) can stand a
// cluster where upstream's operator ran and then install this project's
// over it.
//
// The objects follow the facts of upstream's releases (names, labels, DNS
// names, owner references); they are written here, not copied.
package upstream

import (
	"fmt"
	"strings"
	"time"
)

// Labels of upstream's v2beta1 operator on the pods it creates.
const (
	LabelOperatorName = "training.kubeflow.org/operator-name"
	LabelJobName      = "training.kubeflow.org/job-name"
	LabelJobRole      = "training.kubeflow.org/job-role"
	LabelReplicaIndex = "training.kubeflow.org/replica-index"
)

// Workers is the number of workers of the jobs of JobManifest.
const Workers = 2

// JobManifest is an MPIJob of Workers workers that computes pi; spec holds
// more lines of its spec, each indented by two spaces and ending in a
// newline.
func JobManifest(apiVersion, ns, name, image, spec string) string {
	return fmt.Sprintf(`apiVersion: %[1]s
kind: MPIJob
metadata:
  name: %[2]s
  namespace: %[3]s
spec:
  slotsPerWorker: 1
%[5]s  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: %[4]s
            command: [mpirun, -n, "%[6]d", /home/mpiuser/pi]
    Worker:
      replicas: %[6]d
      template:
        spec:
          containers:
          - name: worker
            image: %[4]s
`, apiVersion, name, ns, image, spec, Workers)
}

// OwnerRef is the metadata lines of the controller reference that the
// upstream operator puts on each child of the job.
func OwnerRef(apiVersion, name, uid string) string {
	return fmt.Sprintf(`  ownerReferences:
  - apiVersion: %s
    kind: MPIJob
    name: %s
    uid: %s
    controller: true
    blockOwnerDeletion: true
`, apiVersion, name, uid)
}

// V2Image is the image of the v2beta1 jobs of V2Job.
const V2Image = "mpioperator/mpi-pi:openmpi"

// V2JobSpec is the spec of V2Job's MPIJob beyond JobManifest's: fields
// that only v2beta1 has, so that a test can tell that none was lost.
const V2JobSpec = "  sshAuthMountPath: /home/mpiuser/.ssh\n  mpiImplementation: OpenMPI\n  runPolicy:\n    cleanPodPolicy: Running\n"

// V2Job is the MPIJob of V2Children, through kubeflow.org/v2beta1.
func V2Job(ns, name string) string {
	return JobManifest("kubeflow.org/v2beta1", ns, name, V2Image, V2JobSpec)
}

// V2Children are the children that upstream's v2beta1 operator gives the
// running job of V2Job whose UID is uid: the headless Service named
// service, the ConfigMap with the hostfile and discover_hosts.sh, the SSH
// Secret, the worker pods and the launcher batch/v1 Job. Every pod's DNS
// subdomain is service: upstream v0.8.0 names it <job>, v0.3.0 named it
// <job>-worker.
func V2Children(ns, name, uid, service string) string {
	owner := OwnerRef("kubeflow.org/v2beta1", name, uid)
	var hosts []string
	for i := range Workers {
		hosts = append(hosts, fmt.Sprintf("%s-worker-%d.%s.%s.svc", name, i, service, ns))
	}
	var b strings.Builder
	b.WriteString(head("v1", "Service", service, ns, name, owner))
	fmt.Fprintf(&b, `spec:
  clusterIP: None
  selector: {%s: mpi-operator, %s: %s, %s: worker}
`, LabelOperatorName, LabelJobName, name, LabelJobRole)
	b.WriteString(head("v1", "ConfigMap", name+"-config", ns, name, owner))
	fmt.Fprintf(&b, "data:\n  hostfile: |\n%s  discover_hosts.sh: |\n    #!/bin/sh\n%s",
		lines(hosts, "    %s slots=1"), lines(hosts, "    echo %s"))
	b.WriteString(head("v1", "Secret", name+"-ssh", ns, name, owner))
	b.WriteString(`type: kubernetes.io/ssh-auth
stringData:
  ssh-privatekey: "not a real key"
  ssh-publickey: "not a real key"
`)
	for i := range Workers {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-worker-%[4]d
  namespace: %[2]s
  labels:
    %[6]s: mpi-operator
    %[7]s: %[1]s
    %[8]s: worker
    %[9]s: "%[4]d"
%[3]sspec:
  hostname: %[1]s-worker-%[4]d
  subdomain: %[5]s
  containers:
  - name: worker
    image: %[10]s
    command: [/usr/sbin/sshd, -De]
    env: [{name: K_MPI_JOB_ROLE, value: worker}]
    volumeMounts: [{name: ssh-auth, mountPath: /home/mpiuser/.ssh}]
  volumes:
%[11]s`, name, ns, owner, i, service, LabelOperatorName, LabelJobName, LabelJobRole, LabelReplicaIndex,
			V2Image, sshVolume(name, "  "))
	}
	b.WriteString(head("batch/v1", "Job", name+"-launcher", ns, name, owner))
	fmt.Fprintf(&b, `spec:
  backoffLimit: 6
  template:
    metadata:
      labels:
        %[5]s: mpi-operator
        %[6]s: %[1]s
        %[7]s: launcher
        %[8]s: "0"
    spec:
      restartPolicy: OnFailure
      hostname: %[1]s-launcher
      subdomain: %[4]s
      containers:
      - name: launcher
        image: %[9]s
        command: [mpirun, -n, "%[10]d", /home/mpiuser/pi]
        env:
        - {name: K_MPI_JOB_ROLE, value: launcher}
        - {name: OMPI_MCA_orte_keep_fqdn_hostnames, value: "true"}
        - {name: OMPI_MCA_orte_default_hostfile, value: /etc/mpi/hostfile}
        - {name: OMPI_MCA_plm_rsh_args, value: -o ConnectionAttempts=10}
        - {name: OMPI_MCA_orte_set_default_slots, value: "1"}
        volumeMounts:
        - {name: ssh-auth, mountPath: /home/mpiuser/.ssh}
        - {name: mpi-job-config, mountPath: /etc/mpi}
      volumes:
%[11]s      - name: mpi-job-config
        configMap:
          name: %[1]s-config
          items:
          - {key: hostfile, path: hostfile, mode: 292}
          - {key: discover_hosts.sh, path: discover_hosts.sh, mode: 365}
`, name, ns, owner, service, LabelOperatorName, LabelJobName, LabelJobRole, LabelReplicaIndex,
		V2Image, Workers, sshVolume(name, "      "))
	return b.String()
}

// head starts the manifest of a child that is not a pod: its kind, name,
// namespace, the label app: <job> and the owner reference.
func head(apiVersion, kind, name, ns, job, owner string) string {
	return fmt.Sprintf("---\napiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {app: %s}\n%s",
		apiVersion, kind, name, ns, job, owner)
}

// sshVolume is the volume of the job's SSH Secret as upstream mounts it,
// each line after indent.
func sshVolume(name, indent string) string {
	return indentLines(fmt.Sprintf(`- name: ssh-auth
  secret:
    secretName: %s-ssh
    defaultMode: 384
    items:
    - {key: ssh-privatekey, path: id_rsa}
    - {key: ssh-publickey, path: id_rsa.pub}
    - {key: ssh-publickey, path: authorized_keys}
`, name), indent)
}

// V2RunningStatus is the status, as a merge patch of the status
// subresource, that upstream's v2beta1 operator writes for the running
// job of V2Job: Created and Running, one active launcher and Workers
// active workers, and the start time.
func V2RunningStatus(ns, name string, now time.Time) string {
	at := now.UTC().Format(time.RFC3339)
	return fmt.Sprintf(`{"status":{
		"conditions":[
			{"type":"Created","status":"True","reason":"MPIJobCreated","message":"MPIJob %[2]s/%[1]s is created.","lastUpdateTime":%[3]q,"lastTransitionTime":%[3]q},
			{"type":"Running","status":"True","reason":"MPIJobRunning","message":"MPIJob %[2]s/%[1]s is running.","lastUpdateTime":%[3]q,"lastTransitionTime":%[3]q}],
		"replicaStatuses":{"Launcher":{"active":1},"Worker":{"active":%[4]d}},
		"startTime":%[3]q,
		"lastReconcileTime":%[3]q}}`, name, ns, at, Workers)
}

// lines formats each item with format, a line each.
func lines(items []string, format string) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, format+"\n", it)
	}
	return b.String()
}

// indentLines puts indent before each line of s.
func indentLines(s, indent string) string {
	return indent + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+indent) + "\n"
}
