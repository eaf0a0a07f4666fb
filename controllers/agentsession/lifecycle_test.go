package agentsession

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestTheSessionOwnsEachOfItsTurnsAndNoOtherRun(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentSession", Name: "talk",
		UID: "uid-talk", BlockOwnerDeletion: ptr.To(false)}
	keep := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "uid-keep"}
	kept := turn("kept", 4, v1alpha1.PhaseSucceeded).endedAgo(time.Minute).AgentRun
	kept.OwnerReferences = []metav1.OwnerReference{keep}
	w := newWorld(t, talk(),
		turn("c", 1, v1alpha1.PhaseSucceeded).used(100, "0.01").endedAgo(10*time.Minute).AgentRun,
		turn("b", 2, v1alpha1.PhaseFailed).used(50, "0.02").endedAgo(5*time.Minute).AgentRun,
		turn("a", 3, v1alpha1.PhaseRunning).used(25, "0.005").AgentRun,
		kept,
		turn("theirs", 1, v1alpha1.PhaseRunning).of("other").AgentRun)
	// Twice: a turn the session already owns is not owned again.
	w.reconcile()
	w.reconcile()
	for name, want := range map[string][]metav1.OwnerReference{
		"a": {owner}, "b": {owner}, "c": {owner},
		"kept":   {keep, owner},
		"theirs": nil,
	} {
		if diff := cmp.Diff(want, w.run(ns, name).OwnerReferences); diff != "" {
			t.Errorf("owners of run %s (-want +got):\n%s", name, diff)
		}
	}
}

func TestAnEndedSessionStaysEnded(t *testing.T) {
	w := newWorld(t, talk(annotated(v1alpha1.AnnotationEnd, "done")),
		turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun)
	w.reconcile()
	if got := w.emitted(); len(got) != 1 || got[0] != "Normal SessionEnded Ended: done" {
		t.Fatalf("events %q; want one SessionEnded", got)
	}
	ended := w.session().Status
	if ended.Phase != v1alpha1.SessionEnded {
		t.Fatalf("phase %s; want Ended", ended.Phase)
	}

	// People take the annotation off and another turn turns up; time goes on.
	s := w.session()
	delete(s.Annotations, v1alpha1.AnnotationEnd)
	if err := w.c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(context.Background(), turn("two", 2, v1alpha1.PhaseSucceeded).used(5, "0.01").endedAgo(0).AgentRun); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(time.Hour)
	w.reconcile()

	st := w.session().Status
	want := outcome{Phase: v1alpha1.SessionEnded, Turns: 2, LastRun: "two", TokensUsed: 15, Cost: "0.02",
		EndReason: v1alpha1.SessionReasonEnded, EndMessage: "done", IdleSince: now, Conditions: conds(no, no, no)}
	if diff := cmp.Diff(want, outcomeOf(st)); diff != "" {
		t.Errorf("status after the annotation was taken off (-want +got):\n%s", diff)
	}
	if st.EndTime == nil || !st.EndTime.Equal(ended.EndTime) {
		t.Errorf("endTime %v; want it kept at %v", st.EndTime, ended.EndTime)
	}
	if got := w.emitted(); len(got) != 0 {
		t.Errorf("events %q; want none: the session ended once", got)
	}
}

func TestASessionEndsOnceItsLastTurnEndsAtMaxTurns(t *testing.T) {
	w := newWorld(t, talk(limits(v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)})),
		turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun,
		turn("two", 2, v1alpha1.PhaseRunning).used(10, "0.01").AgentRun)
	w.reconcile()
	if st := w.session().Status; st.Phase != v1alpha1.SessionActive || st.EndReason != "" {
		t.Fatalf("while the last turn runs: phase %s, endReason %q; want Active, none", st.Phase, st.EndReason)
	}
	if got := w.emitted(); len(got) != 0 {
		t.Fatalf("events %q; want none yet", got)
	}

	two := w.run(ns, "two")
	two.Status.Phase, two.Status.CompletionTime = v1alpha1.PhaseSucceeded, ptr.To(metav1.NewTime(now))
	if err := w.c.Status().Update(context.Background(), two); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	st := w.session().Status
	if st.Phase != v1alpha1.SessionEnded || st.EndReason != v1alpha1.SessionReasonMaxTurns {
		t.Errorf("once the last turn ended: phase %s, endReason %q; want Ended, MaxTurnsExceeded", st.Phase, st.EndReason)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.SessionReasonMaxTurns {
		t.Errorf("Stalled %+v; want True, MaxTurnsExceeded", c)
	}
	if got := w.emitted(); len(got) != 1 {
		t.Errorf("events %q; want one SessionEnded", got)
	}
}

func TestAnIdleSessionIsDeletedOnceItsTimeToLiveHasPassed(t *testing.T) {
	cases := []struct {
		name string
		objs []client.Object
		// first is the requeue of the first reconcile, at now.
		first time.Duration
		// step is how far the clock goes before the second reconcile.
		step time.Duration
		// second is the requeue of the second reconcile.
		second time.Duration
		gone   bool
	}{
		{
			name: "idle for 4 of its 10 minutes: it is looked at again in 6, and deleted then",
			objs: []client.Object{talk(ttl(600)),
				turn("one", 1, v1alpha1.PhaseSucceeded).endedAgo(20 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseSucceeded).endedAgo(4 * time.Minute).AgentRun},
			first: 6 * time.Minute, step: 6 * time.Minute, gone: true,
		},
		{
			name: "idle for 4 of its 10 minutes: a minute later it is looked at again in 5",
			objs: []client.Object{talk(ttl(600)),
				turn("one", 1, v1alpha1.PhaseFailed).endedAgo(4 * time.Minute).AgentRun},
			first: 6 * time.Minute, step: time.Minute, second: 5 * time.Minute,
		},
		{
			name: "an ended session is deleted too once its time to live has passed",
			objs: []client.Object{talk(ttl(60), annotated(v1alpha1.AnnotationEnd, "done")),
				turn("one", 1, v1alpha1.PhaseSucceeded).endedAgo(30 * time.Second).AgentRun},
			first: 30 * time.Second, step: time.Hour, gone: true,
		},
		{
			name: "a session with a turn at work is not idle: it is not deleted however long ago its other turns ended",
			objs: []client.Object{talk(ttl(60)),
				turn("one", 1, v1alpha1.PhaseSucceeded).endedAgo(time.Hour).AgentRun,
				turn("two", 2, v1alpha1.PhaseRunning).AgentRun},
			step: time.Hour,
		},
		{
			name: "a session without a time to live is kept",
			objs: []client.Object{talk(),
				turn("one", 1, v1alpha1.PhaseSucceeded).endedAgo(time.Hour).AgentRun},
			step: 1000 * time.Hour,
		},
		{
			name: "a session without turns is not idle since anything: it is kept",
			objs: []client.Object{talk(ttl(60))},
			step: time.Hour,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.objs...)
			if res := w.reconcile(); res.RequeueAfter != tc.first {
				t.Errorf("first requeue after %s; want %s", res.RequeueAfter, tc.first)
			}
			if w.session() == nil {
				t.Fatal("the session was deleted before its time to live passed")
			}
			w.clock.Step(tc.step)
			if res := w.reconcile(); res.RequeueAfter != tc.second {
				t.Errorf("second requeue after %s; want %s", res.RequeueAfter, tc.second)
			}
			if gone := w.session() == nil; gone != tc.gone {
				t.Errorf("session deleted: %t; want %t", gone, tc.gone)
			}
			// Its turns go with it, whether or not a garbage collector runs.
			runs := &v1alpha1.AgentRunList{}
			if err := w.c.List(context.Background(), runs); err != nil {
				t.Fatal(err)
			}
			if left := len(runs.Items); tc.gone && left != 0 {
				t.Errorf("%d turns left after their session was deleted", left)
			}
		})
	}
}

// A turn numbered while its session expires keeps the session: the webhook's write of the
// session's status makes the delete fail, and the new turn is at work when it is looked at again.
func TestATurnNumberedAsItsSessionExpiresKeepsIt(t *testing.T) {
	numbered := false
	funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if s, ok := obj.(*v1alpha1.AgentSession); ok && !numbered {
			numbered = true
			// The webhook numbers a turn between the session's read and its delete.
			now := &v1alpha1.AgentSession{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), now); err != nil {
				return err
			}
			now.Status.Numbered++
			if err := c.Status().Update(ctx, now); err != nil {
				return err
			}
			if err := c.Create(ctx, turn("two", 2, v1alpha1.PhasePending).AgentRun); err != nil {
				return err
			}
		}
		return c.Delete(ctx, obj, opts...)
	}}
	w := newWorldWith(t, funcs, talk(ttl(60)), turn("one", 1, v1alpha1.PhaseSucceeded).endedAgo(time.Hour).AgentRun)
	w.reconcile()
	if w.session() == nil {
		t.Fatal("the session was deleted with a turn numbered after it was read")
	}
	w.run(ns, "one")
	w.reconcile()
	if s := w.session(); s == nil || s.Status.Phase != v1alpha1.SessionActive {
		t.Fatalf("after the new turn the session is %+v, want it Active", s)
	}
}

// Turns owned by a session that is gone are deleted (an operator stopped between the two);
// a turn created before its session, not yet owned, is kept for it.
func TestTheTurnsOfAGoneSessionGo(t *testing.T) {
	owned := turn("owned", 1, v1alpha1.PhaseSucceeded).endedAgo(time.Hour).AgentRun
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentSession", Name: "talk", UID: "gone"}}
	w := newWorld(t, owned, turn("early", 1, v1alpha1.PhasePending).AgentRun)
	w.reconcile()
	runs := &v1alpha1.AgentRunList{}
	if err := w.c.List(context.Background(), runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Items) != 1 || runs.Items[0].Name != "early" {
		t.Errorf("runs left %v, want only the turn created before its session", runs.Items)
	}
}

func TestASessionThatIsGoneOrGoingIsLeftAlone(t *testing.T) {
	t.Run("a session that does not exist is no error", func(t *testing.T) {
		w := newWorld(t)
		if res := w.reconcile(); res != (ctrl.Result{}) {
			t.Errorf("result %+v; want none", res)
		}
	})
	t.Run("a session being deleted gets no status and does not own its turns", func(t *testing.T) {
		s := talk()
		s.Finalizers = []string{"example.com/hold"}
		s.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		w := newWorld(t, s, turn("one", 1, v1alpha1.PhaseRunning).AgentRun)
		if res := w.reconcile(); res != (ctrl.Result{}) {
			t.Errorf("result %+v; want none", res)
		}
		if st := w.session().Status; st.Phase != "" || st.Turns != 0 {
			t.Errorf("status %+v; want none written", st)
		}
		if owners := w.run(ns, "one").OwnerReferences; len(owners) != 0 {
			t.Errorf("owners %+v; want none", owners)
		}
	})
}
