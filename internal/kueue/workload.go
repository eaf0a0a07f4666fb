// Package kueue makes an AgentRun a Kueue workload: the Workload that asks Kueue to admit a run
// labelled with a LocalQueue, and what Kueue's conditions on it mean for the run. Its functions
// are pure, over Kueue's own API types: the AgentRun reconciler reads and writes the objects.
//
// A run's Workload requests one agents.baton.dev/runs, so a ClusterQueue's nominal quota of that
// resource is how many runs of its LocalQueues run at once; cohorts, borrowing and preemption
// then share it across teams as they share any other resource (docs/kueue.md).
package kueue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
)

const (
	// QueueLabel on an AgentRun names the LocalQueue, in the run's namespace, that admits it.
	// It is the label Kueue reads on every kind of job it queues.
	QueueLabel = "kueue.x-k8s.io/queue-name"

	// ResourceRuns is the resource a run's Workload requests one of. A ClusterQueue that covers
	// it, with a nominal quota of n, runs at most n runs of its LocalQueues at once.
	ResourceRuns corev1.ResourceName = "agents.baton.dev/runs"

	// JobUIDLabel carries the run's UID on its Workload, as Kueue's own integrations carry their
	// job's: Kueue names it in the messages of the Workloads it preempts.
	JobUIDLabel = "kueue.x-k8s.io/job-uid"

	// LabelManagedBy marks the Workloads Baton makes, as Baton marks the other objects it
	// makes: the operator caches these alone, not every Workload of the cluster's batch jobs.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is LabelManagedBy's value on Baton's Workloads.
	ManagedBy = "baton"

	// PodSetName is the Workload's one pod set, named as Kueue names a single pod set.
	PodSetName = kueue.DefaultPodSetName

	// containerName is the container that stands for the run in the pod set. Nothing runs it:
	// Kueue reads only its requests.
	containerName = "agent-run"

	// workloadPrefix starts every run's Workload name.
	workloadPrefix = "agentrun-"
	// maxWorkloadName keeps a Workload's name a valid label value, as Kueue's own are, so that
	// it can be selected on.
	maxWorkloadName = 63
	// hashLen is the hex digits of the run's UID digest that end the Workload's name.
	hashLen = 8
)

// QueueName is the LocalQueue a run is labelled with, and whether it is labelled: a run with no
// queue label, or an empty one, is not Kueue's to admit, as Kueue treats its own jobs.
func QueueName(run *v1alpha1.AgentRun) (string, bool) {
	name := run.Labels[QueueLabel]
	return name, name != ""
}

// CheckQueueName says why the LocalQueue a run is labelled with cannot be a Workload's queue, if
// it cannot: Kueue takes a DNS subdomain (RFC 1123), which a label value need not be.
func CheckQueueName(name string) error {
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return fmt.Errorf("the label %s=%q names no LocalQueue Kueue can have: %s", QueueLabel, name, strings.Join(problems, "; "))
	}
	return nil
}

// WorkloadName is the name of the run's Workload: "agentrun-", the run's name (cut to fit) and a
// digest of its UID, so that a run made again with the same name gets a Workload of its own,
// and a retried reconcile finds the one it made.
func WorkloadName(run *v1alpha1.AgentRun) string {
	sum := sha256.Sum256([]byte(run.UID))
	suffix := "-" + hex.EncodeToString(sum[:])[:hashLen]
	name := run.Name
	if room := maxWorkloadName - len(workloadPrefix) - len(suffix); len(name) > room {
		// A cut may end on a dot or dash, which may not precede the suffix's dash.
		name = strings.TrimRight(name[:room], ".-")
	}
	return workloadPrefix + name + suffix
}

// Ask is what a run's Workload asks of Kueue: its LocalQueue, its WorkloadPriorityClass (none
// when empty) and its priority (Kueue's default when nil).
type Ask struct {
	Queue         string
	PriorityClass string
	Priority      *int32
}

// Route says whether Kueue admits the run, and in which LocalQueue: the one it remembers from
// when its Workload was made (status.kueue), so that a label dropped later changes nothing; else
// its label; else, when its namespace's quotas make Kueue admit every run (all), their
// defaultQueue ("" when they set none: the run cannot be admitted until they do or it is
// labelled).
func Route(run *v1alpha1.AgentRun, all bool, defaultQueue string) (string, bool) {
	if k := run.Status.Kueue; k != nil {
		return k.Queue, true
	}
	if queue, labelled := QueueName(run); labelled {
		return queue, true
	}
	if all {
		return defaultQueue, true
	}
	return "", false
}

// Priority is the priority of the run's Workload. Where its namespace's quotas list
// WorkloadPriorityClasses (values holds each listed class's value), it is the run's
// spec.priority, or its class's value when it has none, clamped between the lowest and highest
// value listed: a run's author cannot lift it past what the namespace may have. Where they list
// none, it is the run's spec.priority, as it always was.
func Priority(run *v1alpha1.AgentRun, class string, values map[string]int32) *int32 {
	if len(values) == 0 {
		if run.Spec.Priority == nil {
			return nil
		}
		p := *run.Spec.Priority
		return &p
	}
	lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	p, ok := values[class]
	if run.Spec.Priority != nil {
		p, ok = *run.Spec.Priority, true
	}
	if !ok {
		p = lo
	}
	p = min(max(p, lo), hi)
	return &p
}

// WorkloadFor is the Workload that asks Kueue to admit the run: in the run's namespace, named by
// WorkloadName, controlled by the run (so that it goes when the run goes), in the LocalQueue the
// ask names, with one pod set of one pod requesting one ResourceRuns (and no CPU or memory), and
// the ask's priority class and priority: both order its queue higher first, and Kueue's
// preemption within a ClusterQueue takes the lower ones first.
func WorkloadFor(run *v1alpha1.AgentRun, ask Ask) *kueue.Workload {
	one, zero := resource.MustParse("1"), resource.MustParse("0")
	controller := true
	wl := &kueue.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      WorkloadName(run),
			Namespace: run.Namespace,
			Labels:    map[string]string{JobUIDLabel: string(run.UID), LabelManagedBy: ManagedBy},
			// The run controls its Workload, without blockOwnerDeletion: a run deleted in the
			// foreground need not wait for it, and the operator needs no update of
			// agentruns/finalizers to make it where OwnerReferencesPermissionEnforcement holds.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(),
				Kind:       "AgentRun",
				Name:       run.Name,
				UID:        run.UID,
				Controller: &controller,
			}},
		},
		Spec: kueue.WorkloadSpec{
			QueueName: kueue.LocalQueueName(ask.Queue),
			PodSets: []kueue.PodSet{{
				Name:  PodSetName,
				Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: containerName,
						Resources: corev1.ResourceRequirements{
							// A run takes no CPU or memory of the nodes (it runs in the
							// operator), and says so: Kueue would otherwise give it a
							// namespace LimitRange's default requests, and look for quota of
							// them in the ClusterQueue.
							Requests: corev1.ResourceList{ResourceRuns: one, corev1.ResourceCPU: zero, corev1.ResourceMemory: zero},
							// An extended resource's limit equals its request, as in a pod.
							Limits: corev1.ResourceList{ResourceRuns: one},
						},
					}},
				}},
			}},
		},
	}
	if ask.PriorityClass != "" {
		wl.Spec.PriorityClassRef = kueue.NewWorkloadPriorityClassRef(ask.PriorityClass)
	}
	if ask.Priority != nil {
		p := *ask.Priority
		wl.Spec.Priority = &p
	}
	return wl
}
