package agentsession

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
)

const ns = "team-a"

// now is whole seconds: the API keeps times to the second.
var now = time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)

// talk is the session the tests reconcile, of the config "team".
func talk(edit ...func(*v1alpha1.AgentSession)) *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "team"}}}
	s.Name, s.Namespace, s.UID, s.Generation = "talk", ns, types.UID("uid-talk"), 1
	for _, e := range edit {
		e(s)
	}
	return s
}

func limits(l v1alpha1.SessionLimits) func(*v1alpha1.AgentSession) {
	return func(s *v1alpha1.AgentSession) { s.Spec.Limits = &l }
}

func annotated(key, value string) func(*v1alpha1.AgentSession) {
	return func(s *v1alpha1.AgentSession) { s.Annotations = map[string]string{key: value} }
}

func ttl(seconds int32) func(*v1alpha1.AgentSession) {
	return func(s *v1alpha1.AgentSession) { s.Spec.TTLSecondsAfterIdle = ptr.To(seconds) }
}

// turn is turn number n of the session "talk", named name, in phase.
func turn(name string, n int, phase v1alpha1.RunPhase) *turnWrapper {
	r := &v1alpha1.AgentRun{}
	r.Name, r.Namespace = name, ns
	r.Annotations = map[string]string{v1alpha1.AnnotationTurn: strconv.Itoa(n)}
	r.Spec.ConfigRef.Name = "team"
	r.Spec.Session = &v1alpha1.SessionReference{Name: "talk"}
	r.Status.Phase = phase
	if phase != "" && phase != v1alpha1.PhasePending && phase != v1alpha1.PhaseQueued {
		started := metav1.NewMicroTime(now.Add(-time.Hour))
		r.Status.StartTime = &started
	}
	return &turnWrapper{r}
}

type turnWrapper struct{ *v1alpha1.AgentRun }

func (w *turnWrapper) used(tokens int64, cost string) *turnWrapper {
	w.Status.TokensUsed, w.Status.Cost = tokens, cost
	return w
}

// endedAgo gives the turn a completionTime d before now.
func (w *turnWrapper) endedAgo(d time.Duration) *turnWrapper {
	w.Status.CompletionTime = ptr.To(metav1.NewTime(now.Add(-d)))
	return w
}

func (w *turnWrapper) inState(state string) *turnWrapper { w.Status.State = state; return w }

func (w *turnWrapper) of(session string) *turnWrapper {
	w.Spec.Session = &v1alpha1.SessionReference{Name: session}
	return w
}

func (w *turnWrapper) in(namespace string) *turnWrapper { w.Namespace = namespace; return w }

func config(mode v1alpha1.WorkflowMode) *v1alpha1.AgentConfig {
	c := &v1alpha1.AgentConfig{}
	c.Name, c.Namespace = "team", ns
	c.Spec.Mode = mode
	return c
}

func quotaWith(namespace string, l v1alpha1.QuotaRunLimits) *v1alpha1.AgentQuota {
	q := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{RunLimits: &l}}
	q.Name, q.Namespace = "runs", namespace
	return q
}

// world is a fake API server holding objs, with the controller's index, and the controller.
type world struct {
	t      *testing.T
	c      client.Client
	clock  *clocktesting.FakeClock
	events *events.FakeRecorder
	r      *Reconciler
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	return newWorldWith(t, interceptor.Funcs{}, objs...)
}

// newWorldWith is a world whose API server calls go through funcs.
func newWorldWith(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *world {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.AgentSession{}, &v1alpha1.AgentRun{}, &v1alpha1.AgentQuota{}, &v1alpha1.AgentConfig{}).
		WithIndex(&v1alpha1.AgentRun{}, Index, SessionOf).WithInterceptorFuncs(funcs).Build()
	w := &world{t: t, c: c, clock: clocktesting.NewFakeClock(now), events: events.NewFakeRecorder(10)}
	w.r = &Reconciler{Client: c, Clock: w.clock, Recorder: w.events}
	return w
}

// reconcile reconciles the session "talk" and fails the test on an error.
func (w *world) reconcile() ctrl.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "talk"}})
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// session is the session "talk" as the API server has it; nil once it is gone.
func (w *world) session() *v1alpha1.AgentSession {
	w.t.Helper()
	s := &v1alpha1.AgentSession{}
	err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "talk"}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

func (w *world) run(namespace, name string) *v1alpha1.AgentRun {
	w.t.Helper()
	r := &v1alpha1.AgentRun{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, r); err != nil {
		w.t.Fatal(err)
	}
	return r
}

// emitted is the events emitted since it was last called.
func (w *world) emitted() []string {
	var out []string
	for {
		select {
		case e := <-w.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// outcome is what a user reads of a session's status.
type outcome struct {
	Phase      v1alpha1.SessionPhase
	Turns      int32
	LastRun    string
	State      string
	TokensUsed int64
	Cost       string
	EndReason  string
	EndMessage string
	IdleSince  time.Time
	// Conditions are the statuses of Ready, Stalled and Reconciling.
	Conditions map[string]metav1.ConditionStatus
}

func outcomeOf(st v1alpha1.AgentSessionStatus) outcome {
	o := outcome{Phase: st.Phase, Turns: st.Turns, LastRun: st.LastRun, State: st.State, TokensUsed: st.TokensUsed,
		Cost: st.Cost, EndReason: st.EndReason, EndMessage: st.EndMessage, Conditions: map[string]metav1.ConditionStatus{}}
	if st.IdleSince != nil {
		o.IdleSince = st.IdleSince.UTC()
	}
	for _, c := range st.Conditions {
		o.Conditions[c.Type] = c.Status
	}
	return o
}

// conds are Ready, Stalled and Reconciling, in that order.
func conds(ready, stalled, reconciling metav1.ConditionStatus) map[string]metav1.ConditionStatus {
	return map[string]metav1.ConditionStatus{v1alpha1.ConditionReady: ready, v1alpha1.ConditionStalled: stalled,
		v1alpha1.ConditionReconciling: reconciling}
}

const (
	yes = metav1.ConditionTrue
	no  = metav1.ConditionFalse
)

func TestTheSessionsStatusIsMadeOfItsTurns(t *testing.T) {
	cases := []struct {
		name    string
		objs    []client.Object
		want    outcome
		ends    bool // an Event says the session ended
		endTime bool // status.endTime is now
	}{
		{
			name: "three turns, the last one running: the session is active, its last run the third turn and its tokens and cost the sums",
			objs: []client.Object{talk(),
				// Named against their order, so that the order is the turns' numbers.
				turn("c", 1, v1alpha1.PhaseSucceeded).used(100, "0.01").endedAgo(10 * time.Minute).AgentRun,
				turn("b", 2, v1alpha1.PhaseFailed).used(50, "0.02").endedAgo(5 * time.Minute).AgentRun,
				turn("a", 3, v1alpha1.PhaseRunning).used(25, "0.005").AgentRun},
			want: outcome{Phase: v1alpha1.SessionActive, Turns: 3, LastRun: "a", TokensUsed: 175, Cost: "0.035",
				Conditions: conds(yes, no, yes)},
		},
		{
			name: "a turn queued behind the others keeps the session active",
			objs: []client.Object{talk(),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseQueued).AgentRun},
			want: outcome{Phase: v1alpha1.SessionActive, Turns: 2, LastRun: "two", TokensUsed: 10, Cost: "0.01",
				Conditions: conds(yes, no, yes)},
		},
		{
			name: "all turns ended: the session is idle since the latest of their completion times",
			objs: []client.Object{talk(),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(100, "0.01").endedAgo(10 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseFailed).used(50, "0.02").endedAgo(3 * time.Minute).AgentRun,
				turn("three", 3, v1alpha1.PhaseCancelled).used(0, "").endedAgo(7 * time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 3, LastRun: "three", TokensUsed: 150, Cost: "0.03",
				IdleSince: now.Add(-3 * time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "a session without turns is idle, with no cost",
			objs: []client.Object{talk()},
			want: outcome{Phase: v1alpha1.SessionIdle, Cost: "0", Conditions: conds(yes, no, no)},
		},
		{
			name: "a turn of another session, a run of no session and a turn of a session of the same name elsewhere are not counted",
			objs: []client.Object{talk(),
				turn("mine", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun,
				turn("theirs", 2, v1alpha1.PhaseRunning).used(1000, "5").of("other").AgentRun,
				func() client.Object {
					r := turn("alone", 3, v1alpha1.PhaseRunning).used(1000, "5").AgentRun
					r.Spec.Session = nil
					return r
				}(),
				turn("elsewhere", 4, v1alpha1.PhaseRunning).used(1000, "5").in("team-b").AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 1, LastRun: "mine", TokensUsed: 10, Cost: "0.01",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "agents.baton.dev/end ends the session with the reason people give",
			objs: []client.Object{talk(annotated(v1alpha1.AnnotationEnd, "done")),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 1, LastRun: "one", TokensUsed: 10, Cost: "0.01",
				EndReason: v1alpha1.SessionReasonEnded, EndMessage: "done", IdleSince: now.Add(-time.Minute),
				Conditions: conds(no, no, no)},
			ends: true, endTime: true,
		},
		{
			name: "agents.baton.dev/end without a reason ends the session by hand",
			objs: []client.Object{talk(annotated(v1alpha1.AnnotationEnd, ""))},
			want: outcome{Phase: v1alpha1.SessionEnded, Cost: "0", EndReason: v1alpha1.SessionReasonEnded,
				EndMessage: "ended by hand", Conditions: conds(no, no, no)},
			ends: true, endTime: true,
		},
		{
			name: "the turns' tokens reach limits.maxTokens: the session ends, stalled",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](100)})),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(60, "0.01").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseFailed).used(40, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 2, LastRun: "two", TokensUsed: 100, Cost: "0.02",
				EndReason: string(v1alpha1.ReasonTokenBudgetExceeded), EndMessage: "the session's turns used 100 tokens of 100",
				IdleSince: now.Add(-time.Minute), Conditions: conds(no, yes, no)},
			ends: true, endTime: true,
		},
		{
			name: "the turns' tokens below limits.maxTokens: the session goes on",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](100)})),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(99, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 1, LastRun: "one", TokensUsed: 99, Cost: "0.01",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "the turns' cost reaches limits.maxCost: the session ends, stalled",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxCost: ptr.To("0.03")})),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseSucceeded).used(10, "0.02").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 2, LastRun: "two", TokensUsed: 20, Cost: "0.03",
				EndReason: string(v1alpha1.ReasonCostBudgetExceeded), EndMessage: "the session's turns cost 0.03 of 0.03",
				IdleSince: now.Add(-time.Minute), Conditions: conds(no, yes, no)},
			ends: true, endTime: true,
		},
		{
			name: "the turns' cost below limits.maxCost: the session goes on",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxCost: ptr.To("0.05")})),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseSucceeded).used(10, "0.02").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 2, LastRun: "two", TokensUsed: 20, Cost: "0.03",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "limits.maxTurns reached while the last turn still runs: the session does not end yet",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)})),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseRunning).used(10, "0.01").AgentRun},
			want: outcome{Phase: v1alpha1.SessionActive, Turns: 2, LastRun: "two", TokensUsed: 20, Cost: "0.02",
				Conditions: conds(yes, no, yes)},
		},
		{
			name: "limits.maxTurns reached and the last turn ended: the session ends, stalled",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)})),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseSucceeded).used(10, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 2, LastRun: "two", TokensUsed: 20, Cost: "0.02",
				EndReason: v1alpha1.SessionReasonMaxTurns, EndMessage: "the session took 2 turns of 2",
				IdleSince: now.Add(-time.Minute), Conditions: conds(no, yes, no)},
			ends: true, endTime: true,
		},
		{
			name: "a namespace's runLimits.maxTokens below the session's limits.maxTokens ends the session at the quota's bound",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](1000)})),
				quotaWith(ns, v1alpha1.QuotaRunLimits{MaxTokens: ptr.To[int64](50)}),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(30, "0.01").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseSucceeded).used(25, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 2, LastRun: "two", TokensUsed: 55, Cost: "0.02",
				EndReason: string(v1alpha1.ReasonTokenBudgetExceeded), EndMessage: "the session's turns used 55 tokens of 50",
				IdleSince: now.Add(-time.Minute), Conditions: conds(no, yes, no)},
			ends: true, endTime: true,
		},
		{
			name: "a namespace's runLimits.maxTokens bounds a session without limits",
			objs: []client.Object{talk(),
				quotaWith(ns, v1alpha1.QuotaRunLimits{MaxTokens: ptr.To[int64](50)}),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(50, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 1, LastRun: "one", TokensUsed: 50, Cost: "0.01",
				EndReason: string(v1alpha1.ReasonTokenBudgetExceeded), EndMessage: "the session's turns used 50 tokens of 50",
				IdleSince: now.Add(-time.Minute), Conditions: conds(no, yes, no)},
			ends: true, endTime: true,
		},
		{
			name: "a namespace's runLimits.maxCost below the session's limits.maxCost ends the session at the quota's bound",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxCost: ptr.To("10")})),
				quotaWith(ns, v1alpha1.QuotaRunLimits{MaxCost: ptr.To("0.02")}),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(10, "0.025").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionEnded, Turns: 1, LastRun: "one", TokensUsed: 10, Cost: "0.025",
				EndReason: string(v1alpha1.ReasonCostBudgetExceeded), EndMessage: "the session's turns cost 0.025 of 0.02",
				IdleSince: now.Add(-time.Minute), Conditions: conds(no, yes, no)},
			ends: true, endTime: true,
		},
		{
			name: "a namespace's runLimits.maxTokens above the session's limits.maxTokens leaves the session's",
			objs: []client.Object{talk(limits(v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](100)})),
				quotaWith(ns, v1alpha1.QuotaRunLimits{MaxTokens: ptr.To[int64](1000)}),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(99, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 1, LastRun: "one", TokensUsed: 99, Cost: "0.01",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "another namespace's runLimits do not bound the session",
			objs: []client.Object{talk(),
				quotaWith("team-b", v1alpha1.QuotaRunLimits{MaxTokens: ptr.To[int64](5)}),
				turn("one", 1, v1alpha1.PhaseSucceeded).used(99, "0.01").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 1, LastRun: "one", TokensUsed: 99, Cost: "0.01",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "a StateMachine team: the state is where the last turn led when it succeeded",
			objs: []client.Object{talk(), config(v1alpha1.ModeStateMachine),
				turn("one", 1, v1alpha1.PhaseSucceeded).inState("review").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseSucceeded).inState("ship").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 2, LastRun: "two", State: "ship", Cost: "0",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "a StateMachine team: the state is empty, the first state, when the last turn failed",
			objs: []client.Object{talk(), config(v1alpha1.ModeStateMachine),
				turn("one", 1, v1alpha1.PhaseSucceeded).inState("review").endedAgo(2 * time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseFailed).inState("ship").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 2, LastRun: "two", Cost: "0",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "a StateMachine team: while a turn runs, the state is where the last ended turn led",
			objs: []client.Object{talk(), config(v1alpha1.ModeStateMachine),
				turn("one", 1, v1alpha1.PhaseSucceeded).inState("review").endedAgo(time.Minute).AgentRun,
				turn("two", 2, v1alpha1.PhaseRunning).inState("ship").AgentRun},
			want: outcome{Phase: v1alpha1.SessionActive, Turns: 2, LastRun: "two", State: "review", Cost: "0",
				Conditions: conds(yes, no, yes)},
		},
		{
			name: "a team that is not a StateMachine: the state stays empty",
			objs: []client.Object{talk(), config(v1alpha1.ModeSwarm),
				turn("one", 1, v1alpha1.PhaseSucceeded).inState("review").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 1, LastRun: "one", Cost: "0",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
		{
			name: "a session whose config does not exist: the state stays empty",
			objs: []client.Object{talk(),
				turn("one", 1, v1alpha1.PhaseSucceeded).inState("review").endedAgo(time.Minute).AgentRun},
			want: outcome{Phase: v1alpha1.SessionIdle, Turns: 1, LastRun: "one", Cost: "0",
				IdleSince: now.Add(-time.Minute), Conditions: conds(yes, no, no)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.objs...)
			if res := w.reconcile(); res.RequeueAfter != 0 {
				t.Errorf("requeue after %s; want none, the session has no time to live", res.RequeueAfter)
			}
			s := w.session()
			if diff := cmp.Diff(tc.want, outcomeOf(s.Status)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if s.Status.ObservedGeneration != s.Generation {
				t.Errorf("observedGeneration %d; want %d", s.Status.ObservedGeneration, s.Generation)
			}
			if tc.endTime != (s.Status.EndTime != nil && s.Status.EndTime.Equal(&metav1.Time{Time: now})) {
				t.Errorf("endTime %v; want it set to now: %t", s.Status.EndTime, tc.endTime)
			}
			got := w.emitted()
			var want []string
			if tc.ends {
				want = []string{"Normal SessionEnded " + tc.want.EndReason + ": " + tc.want.EndMessage}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
