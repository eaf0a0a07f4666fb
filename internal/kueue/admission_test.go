package kueue

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/internal/textbound"
)

func cond(t, status, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: message}
}

func workload(admission *kueue.Admission, conds ...metav1.Condition) *kueue.Workload {
	wl := &kueue.Workload{}
	wl.Spec.QueueName = "team-a"
	wl.Status.Admission = admission
	wl.Status.Conditions = conds
	return wl
}

var inCQ = &kueue.Admission{ClusterQueue: "agents"}

func TestAdmission(t *testing.T) {
	short := "couldn't assign flavors to pod set main: insufficient unused quota for agents.baton.dev/runs in flavor default, 1 more needed"
	preempted := "Preempted to accommodate a workload (UID: u, JobUID: j) due to prioritization in the ClusterQueue"
	for name, tc := range map[string]struct {
		wl       *kueue.Workload
		admitted bool
		evicted  bool
		message  string
	}{
		"a Workload not made yet waits": {},
		"a new Workload waits in its queue": {
			wl: workload(nil), message: "waiting in LocalQueue team-a",
		},
		"a Workload without quota waits, saying what is short": {
			wl:      workload(nil, cond(kueue.WorkloadQuotaReserved, "False", "Pending", short)),
			message: short,
		},
		"a Workload whose LocalQueue does not exist waits, saying so": {
			wl:      workload(nil, cond(kueue.WorkloadQuotaReserved, "False", "Inadmissible", "LocalQueue team-a doesn't exist")),
			message: "LocalQueue team-a doesn't exist",
		},
		"a Workload with quota but pending admission checks waits for them": {
			wl: workload(inCQ, cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", "Quota reserved in ClusterQueue agents"),
				cond(kueue.WorkloadAdmitted, "False", "NoChecks", "The workload has not all admission checks in Ready")),
			message: "The workload has not all admission checks in Ready",
		},
		"an admitted Workload runs": {
			wl: workload(inCQ, cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", "Quota reserved in ClusterQueue agents"),
				cond(kueue.WorkloadAdmitted, "True", "Admitted", "The workload is admitted")),
			admitted: true, message: "admitted by ClusterQueue agents",
		},
		"a preempted Workload is evicted though still Admitted": {
			wl: workload(inCQ, cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", ""),
				cond(kueue.WorkloadAdmitted, "True", "Admitted", ""),
				cond(kueue.WorkloadEvicted, "True", "Preempted", preempted)),
			evicted: true, message: "Workload evicted (Preempted): " + preempted,
		},
		"a deactivated Workload is evicted": {
			wl: workload(inCQ, cond(kueue.WorkloadAdmitted, "True", "Admitted", ""),
				cond(kueue.WorkloadEvicted, "True", "Deactivated", "The workload is deactivated")),
			evicted: true, message: "Workload evicted (Deactivated): The workload is deactivated",
		},
		"a Workload admitted again after an eviction runs": {
			wl: workload(inCQ, cond(kueue.WorkloadAdmitted, "True", "Admitted", ""),
				cond(kueue.WorkloadEvicted, "False", "QuotaReserved", "Previously: "+preempted)),
			admitted: true, message: "admitted by ClusterQueue agents",
		},
		"a finished Workload holds no quota: its run must stop": {
			wl: workload(inCQ, cond(kueue.WorkloadAdmitted, "True", "Admitted", ""),
				cond(kueue.WorkloadFinished, "True", "Succeeded", "")),
			evicted: true, message: "Workload finished (Succeeded)",
		},
		"a Workload being deleted is gone for its run": {
			wl: func() *kueue.Workload {
				wl := workload(inCQ, cond(kueue.WorkloadAdmitted, "True", "Admitted", ""))
				wl.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
				return wl
			}(),
			evicted: true, message: "Workload deleted",
		},
	} {
		t.Run(name, func(t *testing.T) {
			admitted, evicted, message := Admission(tc.wl)
			if admitted != tc.admitted || evicted != tc.evicted || message != tc.message {
				t.Errorf("Admission = %v, %v, %q; want %v, %v, %q", admitted, evicted, message, tc.admitted, tc.evicted, tc.message)
			}
		})
	}
}

func TestAdmissionMessagesAreBounded(t *testing.T) {
	long := strings.Repeat("<quota>", 1000)
	for _, wl := range []*kueue.Workload{
		workload(nil, cond(kueue.WorkloadQuotaReserved, "False", "Pending", long)),
		workload(inCQ, cond(kueue.WorkloadEvicted, "True", "Preempted", long)),
	} {
		if _, _, message := Admission(wl); !textbound.FitsStatus(message, MaxMessage) {
			t.Errorf("a message of %d bytes as stored, past %d", textbound.StatusLen(message), MaxMessage)
		}
	}
}

func TestFinished(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	admitted := func() *kueue.Workload {
		wl := workload(inCQ, cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", ""), cond(kueue.WorkloadAdmitted, "True", "Admitted", ""))
		wl.Generation = 3
		return wl
	}
	for name, tc := range map[string]struct {
		wl      *kueue.Workload
		reason  string
		message string
		changed bool
		want    []metav1.Condition
	}{
		"a run's end finishes its Workload": {
			wl: admitted(), reason: "Succeeded", message: "Completed: the writer answered", changed: true,
			want: []metav1.Condition{cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", ""), cond(kueue.WorkloadAdmitted, "True", "Admitted", ""),
				{Type: kueue.WorkloadFinished, Status: "True", Reason: "Succeeded", Message: "Completed: the writer answered", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)}},
		},
		"an evicted run's end finishes its Workload too": {
			wl: workload(inCQ, cond(kueue.WorkloadEvicted, "True", "Preempted", "")), reason: "Failed", changed: true,
			want: []metav1.Condition{cond(kueue.WorkloadEvicted, "True", "Preempted", ""),
				{Type: kueue.WorkloadFinished, Status: "True", Reason: "Failed", LastTransitionTime: metav1.NewTime(now)}},
		},
		"a Workload finished already keeps its first reason": {
			wl: workload(inCQ, cond(kueue.WorkloadFinished, "True", "Succeeded", "")), reason: "Cancelled",
			want: []metav1.Condition{cond(kueue.WorkloadFinished, "True", "Succeeded", "")},
		},
		"an end without a reason says Finished": {
			wl: workload(nil), changed: true,
			want: []metav1.Condition{{Type: kueue.WorkloadFinished, Status: "True", Reason: "Finished", LastTransitionTime: metav1.NewTime(now)}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if changed := Finished(tc.wl, tc.reason, tc.message, now); changed != tc.changed {
				t.Errorf("Finished changed = %v, want %v", changed, tc.changed)
			}
			if diff := cmp.Diff(tc.want, tc.wl.Status.Conditions, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if _, evicted, _ := Admission(tc.wl); !evicted {
				t.Error("Admission does not stop the run of a finished Workload")
			}
		})
	}
}

func TestFinishedBoundsItsMessage(t *testing.T) {
	wl := workload(inCQ)
	Finished(wl, "Failed", strings.Repeat("&", 10000), time.Unix(0, 0))
	if got := wl.Status.Conditions[0].Message; !textbound.FitsStatus(got, MaxMessage) {
		t.Errorf("a message of %d bytes as stored, past %d", textbound.StatusLen(got), MaxMessage)
	}
}
