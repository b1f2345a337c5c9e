package plugin

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PodOptions are what submit puts into the pod templates of the launcher
// and of the workers alike, as the flags give them. BuildJob checks them.
type PodOptions struct {
	// Env are KEY=VALUE variables of the launcher's and the workers'
	// containers, in that order.
	Env []string
	// Volumes are TYPE:SOURCE:PATH[:ro] mounts of the launcher and the
	// workers (parseVolume).
	Volumes []string
	// NodeSelector are KEY=VALUE node labels the pods need.
	NodeSelector []string
	// Tolerations are KEY[=VALUE][:EFFECT] taints the pods tolerate.
	Tolerations []string
	// ImagePullSecrets name the Secrets to pull the image with.
	ImagePullSecrets []string
	// Labels and Annotations are KEY=VALUE on the job and on both pod
	// templates.
	Labels, Annotations []string
}

// podParts are the options parsed.
type podParts struct {
	env          []corev1.EnvVar
	volumes      []corev1.Volume
	mounts       []corev1.VolumeMount
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
	pullSecrets  []corev1.LocalObjectReference
	labels       map[string]string
	annotations  map[string]string
}

// podParts checks the options for the version given and parses them.
func (o PodOptions) podParts(api API) (podParts, error) {
	var p podParts
	env, err := keyValues("--env", o.Env, validation.IsEnvVarName, nil)
	if err != nil {
		return p, err
	}
	for _, kv := range env {
		p.env = append(p.env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
	}
	for i, spec := range o.Volumes {
		v, m, err := parseVolume(api, i, spec)
		if err != nil {
			return p, err
		}
		for _, other := range p.mounts {
			if path.Clean(other.MountPath) == path.Clean(m.MountPath) {
				return p, fmt.Errorf("invalid --volume %q: another --volume is mounted at %s", spec, m.MountPath)
			}
		}
		p.volumes, p.mounts = append(p.volumes, v), append(p.mounts, m)
	}
	if p.nodeSelector, err = keyValueMap("--node-selector", o.NodeSelector, validation.IsQualifiedName, validation.IsValidLabelValue); err != nil {
		return p, err
	}
	for _, spec := range o.Tolerations {
		t, err := parseToleration(spec)
		if err != nil {
			return p, err
		}
		p.tolerations = append(p.tolerations, t)
	}
	for _, name := range o.ImagePullSecrets {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return p, fmt.Errorf("invalid --image-pull-secret %q: %s", name, strings.Join(msgs, "; "))
		}
		p.pullSecrets = append(p.pullSecrets, corev1.LocalObjectReference{Name: name})
	}
	if p.labels, err = keyValueMap("--label", o.Labels, validation.IsQualifiedName, validation.IsValidLabelValue); err != nil {
		return p, err
	}
	p.annotations, err = keyValueMap("--annotation", o.Annotations, validation.IsQualifiedName, nil)
	return p, err
}

// template is a pod template of the one container given, with the
// options: its own copy of each.
func (p podParts) template(c corev1.Container) corev1.PodTemplateSpec {
	c.Env = slices.Clone(p.env)
	c.VolumeMounts = slices.Clone(p.mounts)
	t := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers:       []corev1.Container{c},
		Volumes:          make([]corev1.Volume, len(p.volumes)),
		NodeSelector:     maps.Clone(p.nodeSelector),
		Tolerations:      slices.Clone(p.tolerations),
		ImagePullSecrets: slices.Clone(p.pullSecrets),
	}}
	for i := range p.volumes {
		p.volumes[i].DeepCopyInto(&t.Spec.Volumes[i])
	}
	if len(p.volumes) == 0 {
		t.Spec.Volumes = nil
	}
	t.Labels, t.Annotations = maps.Clone(p.labels), maps.Clone(p.annotations)
	return t
}

// keyValues reads a flag's KEY=VALUE items, in order, each key checked by
// checkKey and each value by checkValue (nil for any).
func keyValues(flag string, items []string, checkKey, checkValue func(string) []string) ([][2]string, error) {
	var out [][2]string
	seen := map[string]bool{}
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("invalid %s %q: KEY=VALUE expected", flag, item)
		}
		if msgs := checkKey(k); len(msgs) > 0 {
			return nil, fmt.Errorf("invalid %s %q: %s", flag, item, strings.Join(msgs, "; "))
		}
		if checkValue != nil {
			if msgs := checkValue(v); len(msgs) > 0 {
				return nil, fmt.Errorf("invalid %s %q: %s", flag, item, strings.Join(msgs, "; "))
			}
		}
		if seen[k] {
			return nil, fmt.Errorf("invalid %s %q: %s is given twice", flag, item, k)
		}
		seen[k] = true
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// keyValueMap is keyValues as a map; nil for no items.
func keyValueMap(flag string, items []string, checkKey, checkValue func(string) []string) (map[string]string, error) {
	kvs, err := keyValues(flag, items, checkKey, checkValue)
	if err != nil || len(kvs) == 0 {
		return nil, err
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv[0]] = kv[1]
	}
	return m, nil
}

// Volume types of --volume.
const (
	volumePVC       = "pvc"
	volumeHostPath  = "hostpath"
	volumeConfigMap = "configmap"
)

// parseVolume reads the i-th --volume, TYPE:SOURCE:PATH[:ro]: a
// PersistentVolumeClaim (pvc:CLAIM), a directory of the node
// (hostpath:/DIR) or a ConfigMap (configmap:NAME), mounted at PATH,
// read-only with :ro. The volume is named volume-<i>; PATH may not be one
// the operator mounts itself.
func parseVolume(api API, i int, spec string) (corev1.Volume, corev1.VolumeMount, error) {
	bad := func(format string, args ...any) (corev1.Volume, corev1.VolumeMount, error) {
		return corev1.Volume{}, corev1.VolumeMount{}, fmt.Errorf("invalid --volume %q: "+format, append([]any{spec}, args...)...)
	}
	parts := strings.Split(spec, ":")
	if len(parts) < 3 || len(parts) > 4 || len(parts) == 4 && parts[3] != "ro" {
		return bad("TYPE:SOURCE:PATH[:ro] expected, such as pvc:data:/data, hostpath:/mnt/data:/data:ro or configmap:settings:/etc/settings")
	}
	kind, source, mountPath := parts[0], parts[1], parts[2]
	v := corev1.Volume{Name: fmt.Sprintf("volume-%d", i)}
	switch kind {
	case volumePVC, volumeConfigMap:
		if msgs := validation.IsDNS1123Subdomain(source); len(msgs) > 0 {
			return bad("%s: %s", source, strings.Join(msgs, "; "))
		}
		if kind == volumePVC {
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: source, ReadOnly: len(parts) == 4}
		} else {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: source}}
		}
	case volumeHostPath:
		if !path.IsAbs(source) {
			return bad("the node's directory %q must be an absolute path", source)
		}
		v.HostPath = &corev1.HostPathVolumeSource{Path: source}
	default:
		return bad("unknown type %q: pvc, hostpath or configmap", kind)
	}
	if !path.IsAbs(mountPath) {
		return bad("the mount path %q must be an absolute path", mountPath)
	}
	for _, own := range operatorMounts(api) {
		if p := path.Clean(mountPath); p == own || strings.HasPrefix(p, own+"/") {
			return bad("the operator mounts %s itself", own)
		}
	}
	return v, corev1.VolumeMount{Name: v.Name, MountPath: mountPath, ReadOnly: len(parts) == 4}, nil
}

// operatorMounts are the paths the operator of the version mounts into the
// job's containers: the job's files (hostfile, discover_hosts.sh), and
// under v1 the launcher's kubectl, under v2beta1 the job's SSH keys.
func operatorMounts(api API) []string {
	if api == APIv2beta1 {
		return []string{"/etc/mpi", "/root/.ssh"}
	}
	return []string{"/etc/mpi", "/opt/kube"}
}

// parseToleration reads --toleration KEY[=VALUE][:EFFECT]: with a value
// the taint's value must equal it, without one any value does; without an
// effect every effect is tolerated.
func parseToleration(spec string) (corev1.Toleration, error) {
	rest, effect, _ := strings.Cut(spec, ":")
	key, value, withValue := strings.Cut(rest, "=")
	t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
	if withValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	}
	bad := func(why string) (corev1.Toleration, error) {
		return corev1.Toleration{}, fmt.Errorf("invalid --toleration %q: %s; KEY[=VALUE][:EFFECT] expected, such as nvidia.com/gpu:NoSchedule or dedicated=ml:NoExecute", spec, why)
	}
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return bad(strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return bad(strings.Join(msgs, "; "))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return bad(fmt.Sprintf("unknown effect %q: NoSchedule, PreferNoSchedule or NoExecute", effect))
	}
	return t, nil
}

// resources are a container's requests and limits: the CPU and memory the
// flags name, each a request and a limit alike, and GPUs as a limit.
func resources(cpuFlag, cpu, memoryFlag, memory string, gpus int64) (corev1.ResourceRequirements, error) {
	var res corev1.ResourceRequirements
	set := func(name corev1.ResourceName, flag, value string) error {
		if value == "" {
			return nil
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return fmt.Errorf("invalid %s %q: %w", flag, value, err)
		}
		if q.Sign() <= 0 {
			return fmt.Errorf("invalid %s %q: must be positive", flag, value)
		}
		if res.Limits == nil {
			res.Limits, res.Requests = corev1.ResourceList{}, corev1.ResourceList{}
		}
		res.Limits[name], res.Requests[name] = q, q
		return nil
	}
	if err := set(corev1.ResourceCPU, cpuFlag, cpu); err != nil {
		return res, err
	}
	if err := set(corev1.ResourceMemory, memoryFlag, memory); err != nil {
		return res, err
	}
	if gpus > 0 {
		// Extended resources take limits only; the API server copies them
		// into the requests.
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		res.Limits[ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return res, nil
}
