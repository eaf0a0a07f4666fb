package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestTakeDecision(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		in   map[string]string
		want v1alpha1.QueuedDecision
		ok   bool
		left map[string]string
	}{
		"an approve with feedback": {
			in:   map[string]string{v1alpha1.AnnotationApprove: "plan", v1alpha1.AnnotationFeedback: "ok", "other": "kept"},
			want: v1alpha1.QueuedDecision{Action: v1alpha1.DecisionApprove, Gate: "plan", Feedback: "ok", By: "alice", Time: now}, ok: true,
			left: map[string]string{"other": "kept"},
		},
		"a reject with revise": {
			in:   map[string]string{v1alpha1.AnnotationReject: "final", v1alpha1.AnnotationRevise: "crm"},
			want: v1alpha1.QueuedDecision{Action: v1alpha1.DecisionReject, Gate: "final", Revise: "crm", By: "alice", Time: now}, ok: true,
			left: map[string]string{},
		},
		"a reply": {
			in:   map[string]string{v1alpha1.AnnotationReply: "prod-east"},
			want: v1alpha1.QueuedDecision{Action: v1alpha1.DecisionReply, Reply: "prod-east", By: "alice", Time: now}, ok: true,
			left: map[string]string{},
		},
		"feedback alone waits for its decision": {
			in:   map[string]string{v1alpha1.AnnotationFeedback: "later"},
			left: map[string]string{v1alpha1.AnnotationFeedback: "later"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := TakeDecision(tc.in, "alice", now)
			if ok != tc.ok || !cmp.Equal(tc.want, got) || !cmp.Equal(tc.left, tc.in) {
				t.Fatalf("got %+v %v, left %v", got, ok, tc.in)
			}
		})
	}
	long := map[string]string{v1alpha1.AnnotationReply: strings.Repeat("é", 10000)}
	d, _ := TakeDecision(long, "bob", now)
	if n := len([]rune(d.Reply)); n != v1alpha1.MaxDecisionValue+1 {
		t.Fatalf("an oversized value is kept one character past the bound, got %d", n)
	}
}

func TestEnqueueOrdersAndPrunes(t *testing.T) {
	queue := []v1alpha1.QueuedDecision{{Seq: 1}, {Seq: 2}, {Seq: 3}}
	got, err := Enqueue(queue, v1alpha1.QueuedDecision{Action: v1alpha1.DecisionApprove}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("want the unapplied 3 and the new 4, got %+v", got)
	}
	got, _ = Enqueue(nil, v1alpha1.QueuedDecision{}, 7)
	if got[0].Seq != 8 {
		t.Fatalf("numbering continues after the last applied decision, got %d", got[0].Seq)
	}
	full := make([]v1alpha1.QueuedDecision, v1alpha1.MaxQueuedDecisions)
	for i := range full {
		full[i].Seq = int64(i + 1)
	}
	if _, err := Enqueue(full, v1alpha1.QueuedDecision{}, 0); err == nil {
		t.Fatal("a full queue took one more decision")
	}
	annotations := SetDecisions(nil, got)
	back, err := Decisions(annotations)
	if err != nil || !cmp.Equal(got, back) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	if _, ok := SetDecisions(annotations, nil)[v1alpha1.AnnotationDecisions]; ok {
		t.Fatal("an empty queue left its annotation")
	}
}
