package decisions

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestTakeDecision(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		in   map[string]string
		want Queued
		ok   bool
		left map[string]string
	}{
		"an approve with feedback": {
			in:   map[string]string{v1alpha1.AnnotationApprove: "plan", v1alpha1.AnnotationFeedback: "ok", "other": "kept"},
			want: Queued{Action: Approve, Gate: "plan", Feedback: "ok", By: "alice", Time: now}, ok: true,
			left: map[string]string{"other": "kept"},
		},
		"a reject with revise": {
			in:   map[string]string{v1alpha1.AnnotationReject: "final", v1alpha1.AnnotationRevise: "crm"},
			want: Queued{Action: Reject, Gate: "final", Revise: "crm", By: "alice", Time: now}, ok: true,
			left: map[string]string{},
		},
		"a reply": {
			in:   map[string]string{v1alpha1.AnnotationReply: "prod-east"},
			want: Queued{Action: Reply, Reply: "prod-east", By: "alice", Time: now}, ok: true,
			left: map[string]string{},
		},
		"feedback alone waits for its decision": {
			in:   map[string]string{v1alpha1.AnnotationFeedback: "later"},
			left: map[string]string{v1alpha1.AnnotationFeedback: "later"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Take(tc.in, "alice", now)
			if ok != tc.ok || !cmp.Equal(tc.want, got) || !cmp.Equal(tc.left, tc.in) {
				t.Fatalf("got %+v %v, left %v", got, ok, tc.in)
			}
		})
	}
	long := map[string]string{v1alpha1.AnnotationReply: strings.Repeat("é", 10000)}
	d, _ := Take(long, "bob", now)
	if n := len([]rune(d.Reply)); n != MaxValue+1 {
		t.Fatalf("an oversized value is kept one character past the bound, got %d", n)
	}
}

func TestEnqueueOrdersAndPrunes(t *testing.T) {
	queue := []Queued{{Seq: 1}, {Seq: 2}, {Seq: 3}}
	got, err := Enqueue(queue, Queued{Action: Approve}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("want the unapplied 3 and the new 4, got %+v", got)
	}
	got, _ = Enqueue(nil, Queued{}, 7)
	if got[0].Seq != 8 {
		t.Fatalf("numbering continues after the last applied decision, got %d", got[0].Seq)
	}
	full := make([]Queued, MaxQueued)
	for i := range full {
		full[i].Seq = int64(i + 1)
	}
	if _, err := Enqueue(full, Queued{}, 0); err == nil {
		t.Fatal("a full queue took one more decision")
	}
	annotations := Write(nil, got)
	back, err := Read(annotations)
	if err != nil || !cmp.Equal(got, back) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	if _, ok := Write(annotations, nil)[v1alpha1.AnnotationDecisions]; ok {
		t.Fatal("an empty queue left its annotation")
	}
}

func TestAnnotationsAreWhatTakeReads(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	for _, d := range []Queued{
		{Action: Approve, Gate: "plan", Feedback: "go ahead"},
		{Action: Reject, Gate: "final", Revise: "crm", Feedback: "check the disputes"},
		{Action: Reject, Gate: "final"},
		{Action: Reply, Reply: "vendors@"},
	} {
		got, ok := Take(Annotations(d), "alice", now)
		d.By, d.Time = "alice", now
		if diff := cmp.Diff(d, got); !ok || diff != "" {
			t.Errorf("Take(Annotations(%+v)): ok %v, (-want +got):\n%s", d, ok, diff)
		}
	}
}
