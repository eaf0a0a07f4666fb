package agentrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// uids are the UIDs the parent's status lists for its branches, in order.
func uids(run *v1alpha1.AgentRun) []string {
	var out []string
	for _, b := range run.Status.Branches {
		out = append(out, b.UID)
	}
	return out
}

// A fan-out's branch runs are made once, and their UIDs go into the parent's status with its
// next write. While the webhook is trusted that costs no write of its own: a restart before it
// finds the runs by their creator. Untrusted, the UIDs are written as any change is (at once, or
// once the batch period has passed), lest a restart fail the run.
func TestAFanOutListsTheUIDsOfTheBranchRunsItMade(t *testing.T) {
	made := []string{"uid-of-r-b1-1", "uid-of-r-b1-2"}
	for name, tc := range map[string]struct {
		trusted bool
		batch   time.Duration
		// writes are the parent's status writes after the fan-out's reconcile, and after one
		// once a held change is due (startGrace: a change of no step).
		writes [2]int
	}{
		"the webhook trusted, every change written":     {trusted: true, writes: [2]int{0, 0}},
		"the webhook trusted, batched":                  {trusted: true, batch: time.Second, writes: [2]int{0, 0}},
		"the webhook not trusted, every change written": {writes: [2]int{1, 1}},
		"the webhook not trusted, batched":              {batch: time.Second, writes: [2]int{0, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fanOutPlan(t)
			parent, whole := fanOut(t, p)
			c := newCluster(t, parent)
			r := reconciler(t, c, parent, tc.trusted, tc.batch)
			// reconcile reconciles the parent at, and again once the branch runs it began to
			// make are made (the creator's wake).
			reconcile := func(at time.Duration) {
				t.Helper()
				for made := -1; made != len(c.made()); {
					made = len(c.made())
					w, err := r.load(ctx, c.run(t, "r"))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := branching(ctx, r, w, p, t0.Add(at)); err != nil {
						t.Fatal(err)
					}
					settle(t, r, client.ObjectKeyFromObject(parent))
				}
			}
			r.runs.keepWhole(parent, "", whole.HandoffSequence)
			reconcile(time.Second)
			if diff := cmp.Diff([]string{"r-b1-1", "r-b1-2"}, c.made()); diff != "" {
				t.Errorf("runs made (-want +got):\n%s", diff)
			}
			if c.writes("r") != tc.writes[0] {
				t.Errorf("%d status writes after the fan-out's branches were made; want %d", c.writes("r"), tc.writes[0])
			}
			reconcile(time.Second + startGrace + time.Millisecond)
			if c.writes("r") != tc.writes[1] {
				t.Errorf("%d status writes once a held change is due; want %d", c.writes("r"), tc.writes[1])
			}
			if tc.writes[1] == 1 {
				if diff := cmp.Diff(made, uids(c.run(t, "r"))); diff != "" {
					t.Errorf("UIDs written (-want +got):\n%s", diff)
				}
			}
			// The critic's branch fails: the parent's next write ends it, and lists both UIDs.
			critic := c.run(t, "r-b1-2")
			critic.Status.Phase, critic.Status.TerminationReason = v1alpha1.PhaseFailed, v1alpha1.ReasonTooManyErrors
			if err := c.Status().Update(ctx, critic); err != nil {
				t.Fatal(err)
			}
			reconcile(time.Minute)
			got := c.run(t, "r")
			if got.Status.TerminationReason != v1alpha1.ReasonBranchFailed || c.writes("r") != tc.writes[1]+1 {
				t.Fatalf("parent %s/%s after %d writes; want it ended BranchFailed in one more", got.Status.Phase, got.Status.TerminationReason, c.writes("r"))
			}
			if diff := cmp.Diff(made, uids(got)); diff != "" {
				t.Errorf("UIDs listed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"r-b1-1", "r-b1-2"}, c.made()); diff != "" {
				t.Errorf("runs made (-want +got):\n%s", diff)
			}
		})
	}
}

// A fan-out whose branch's name is held by a run the operator did not make for it fails the
// parent BranchFailed, naming that run, and makes, adopts and cancels nothing. The operator's own
// branch runs, found after a restart before their UIDs were written, are its branches' only
// while the webhook that records who created them is trusted.
func TestAFanOutOverATakenNameFailsRatherThanAdopt(t *testing.T) {
	tenantRun := func(parent *v1alpha1.AgentRun, whole v1alpha1.AgentRunStatus) []client.Object {
		run := MakeRun("r-b1-2", ns).Config("research").Input("mine").Annotate(v1alpha1.AnnotationCreatedBy, "mallory").Obj()
		run.UID = "mallory-uid"
		return []client.Object{run}
	}
	forged := func(parent *v1alpha1.AgentRun, whole v1alpha1.AgentRunStatus) []client.Object {
		return []client.Object{branchRunOf(parent, whole, 2, "mallory-uid", "mallory")}
	}
	operators := func(parent *v1alpha1.AgentRun, whole v1alpha1.AgentRunStatus) []client.Object {
		return []client.Object{branchRunOf(parent, whole, 1, "own-1", operatorUser), branchRunOf(parent, whole, 2, "own-2", operatorUser)}
	}
	for name, tc := range map[string]struct {
		held    func(*v1alpha1.AgentRun, v1alpha1.AgentRunStatus) []client.Object
		trusted bool
		// fails is what the parent's end says; "" when it goes on, with uids listed.
		fails string
		uids  []string
	}{
		"a tenant's run of the branch's name": {held: tenantRun, trusted: true,
			fails: "branch r-b1-2 (agent critic) cannot run: AgentRun ns/r-b1-2 holds its name, and Baton did not make it for this fan-out"},
		"a tenant's forged branch run": {held: forged, trusted: true,
			fails: "branch r-b1-2 (agent critic) cannot run: AgentRun ns/r-b1-2 holds its name, and was created by someone other than Baton"},
		"the operator's own runs after a restart": {held: operators, trusted: true, uids: []string{"own-1", "own-2"}},
		"the operator's own runs after a restart, the webhook not trusted": {held: operators,
			fails: "branch r-b1-1 (agent researcher) cannot run: AgentRun ns/r-b1-1 holds its name, and while the admission webhook is not seen installed nothing tells a run Baton made from one written by hand"},
	} {
		t.Run(name, func(t *testing.T) {
			p := fanOutPlan(t)
			parent, whole := fanOut(t, p)
			c := newCluster(t, append(tc.held(parent, whole), parent)...)
			r := reconciler(t, c, parent, tc.trusted, 0)
			if _, err := branching(context.Background(), r, workingOn(t, c, whole), p, t0.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			got := c.run(t, "r")
			if len(c.made()) > 0 || len(c.cancelled) > 0 {
				t.Errorf("made %v, cancelled %v; want no run made or cancelled", c.made(), c.cancelled)
			}
			if tc.fails == "" {
				if got.Status.Phase != v1alpha1.PhaseRunning {
					t.Fatalf("parent %s: %s", got.Status.Phase, got.Status.TerminationMessage)
				}
				// Held for the parent's next write.
				w, err := r.load(context.Background(), got)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.uids, uids(w.AgentRun)); diff != "" {
					t.Errorf("UIDs the next write lists (-want +got):\n%s", diff)
				}
				return
			}
			if got.Status.TerminationReason != v1alpha1.ReasonBranchFailed || got.Status.TerminationMessage != tc.fails {
				t.Errorf("parent %s: %s; want BranchFailed: %s", got.Status.TerminationReason, got.Status.TerminationMessage, tc.fails)
			}
		})
	}
}

// Once the parent lists a branch's UID, a run of the branch's name with another UID is never
// joined (its output and tokens are not the branch's) nor cancelled; the branch's own run is.
func TestOnlyTheRunOfTheListedUIDIsJoinedOrCancelled(t *testing.T) {
	p := fanOutPlan(t)
	parent, whole := fanOut(t, p)
	whole.Branches[0].UID, whole.Branches[1].UID = "u1", "u2"
	parent.Status.Branches = whole.Branches
	impostor := branchRunOf(parent, whole, 1, "forged", operatorUser)
	impostor.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TerminationReason: v1alpha1.ReasonCompleted,
		Output: "forged output", TokensUsed: 9999}
	critic := branchRunOf(parent, whole, 2, "u2", operatorUser)
	critic.Status.Phase = v1alpha1.PhaseRunning
	c := newCluster(t, parent, impostor, critic)
	r := reconciler(t, c, parent, true, 0)
	if _, err := branching(context.Background(), r, workingOn(t, c, whole), p, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got := c.run(t, "r").Status
	const want = "branch r-b1-1 (agent researcher) cannot run: AgentRun ns/r-b1-1 (uid forged) is not the run Baton made for it (uid u1)"
	if got.TerminationReason != v1alpha1.ReasonBranchFailed || got.TerminationMessage != want {
		t.Errorf("parent %s: %s; want BranchFailed: %s", got.TerminationReason, got.TerminationMessage, want)
	}
	if got.TokensUsed != whole.TokensUsed || strings.Contains(got.Input, "forged output") {
		t.Errorf("tokens %d, input %q: the impostor's use or output was taken", got.TokensUsed, got.Input)
	}
	if diff := cmp.Diff([]string{"r-b1-2"}, c.cancelled); diff != "" {
		t.Errorf("cancelled (-want +got):\n%s", diff)
	}
}

// A branch whose run the parent lists is gone fails the parent: it is not made again.
func TestABranchWhoseRunIsGoneFailsItsParent(t *testing.T) {
	p := fanOutPlan(t)
	parent, whole := fanOut(t, p)
	whole.Branches[0].UID, whole.Branches[1].UID = "u1", "u2"
	parent.Status.Branches = whole.Branches
	c := newCluster(t, parent, branchRunOf(parent, whole, 2, "u2", operatorUser))
	r := reconciler(t, c, parent, true, 0)
	if _, err := branching(context.Background(), r, workingOn(t, c, whole), p, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got := c.run(t, "r").Status
	const want = "branch r-b1-1 (agent researcher) cannot run: the run Baton made for it (uid u1) was deleted"
	if got.TerminationReason != v1alpha1.ReasonBranchFailed || got.TerminationMessage != want {
		t.Errorf("parent %s: %s; want BranchFailed: %s", got.TerminationReason, got.TerminationMessage, want)
	}
	if len(c.made()) > 0 {
		t.Errorf("made %v again", c.made())
	}
}

// A parent that ends cancels a branch's run only when it is the branch's own: the run of the UID
// listed, or, with none listed yet, the run this process made, or one only the operator can have
// made while the webhook is trusted.
func TestAParentsEndCancelsOnlyItsBranchesOwnRuns(t *testing.T) {
	for name, tc := range map[string]struct {
		listed, uid types.UID
		made        bool
		creator     string
		trusted     bool
		cancelled   bool
	}{
		"the run of the UID listed":                       {listed: "u1", uid: "u1", creator: operatorUser, cancelled: true},
		"another run than the UID listed":                 {listed: "u1", uid: "forged", creator: operatorUser, trusted: true},
		"the run this process made":                       {uid: "u1", made: true, creator: operatorUser, cancelled: true},
		"the operator's own run, after a restart":         {uid: "u1", creator: operatorUser, trusted: true, cancelled: true},
		"the operator's own run, the webhook not trusted": {uid: "u1", creator: operatorUser},
		"a tenant's run":                                  {uid: "u1", creator: "mallory", trusted: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := fanOutPlan(t)
			parent, whole := fanOut(t, p)
			whole.Branches[0].UID = string(tc.listed)
			run := branchRunOf(parent, whole, 1, tc.uid, tc.creator)
			run.Status.Phase = v1alpha1.PhaseRunning
			ended := workflow.Cancel(whole, "not needed", t0.Add(time.Second)).Status
			parent.Status = ended
			c := newCluster(t, parent, run)
			r := reconciler(t, c, parent, tc.trusted, 0)
			if tc.made {
				r.runs.madeBranch(parent, run.Name, tc.uid, t0)
			}
			if err := r.cancelBranches(context.Background(), parent, workflow.BranchesToCancel(&ended), "its parent run ended"); err != nil {
				t.Fatal(err)
			}
			_, annotated := c.run(t, "r-b1-1").Annotations[v1alpha1.AnnotationCancel]
			if annotated != tc.cancelled || (len(c.cancelled) > 0) != tc.cancelled {
				t.Errorf("cancelled %v; want %v", annotated, tc.cancelled)
			}
		})
	}
}

// A branch run starts only when its parent vouches for it: it controls it (an AgentRun's
// reference, not one of another kind that copies its UID) and lists it, by its UID once it
// lists one.
func TestAParentVouchesOnlyForItsOwnBranchRun(t *testing.T) {
	p := fanOutPlan(t)
	parent, whole := fanOut(t, p)
	parent.Status = whole
	shares := workflow.Shares(p, &whole)
	for name, tc := range map[string]struct {
		edit func(parent, run *v1alpha1.AgentRun)
		want string
	}{
		"the branch's run":          {edit: func(*v1alpha1.AgentRun, *v1alpha1.AgentRun) {}},
		"the run of the UID listed": {edit: func(p, _ *v1alpha1.AgentRun) { p.Status.Branches[0].UID = "uid-1" }},
		"another run than the UID listed": {edit: func(p, _ *v1alpha1.AgentRun) { p.Status.Branches[0].UID = "uid-0" },
			want: "the parent r lists another run (uid uid-0) as its branch 1"},
		"a reference of another kind copying the parent's UID": {edit: func(_, r *v1alpha1.AgentRun) { r.OwnerReferences[0].Kind = "ConfigMap" },
			want: "the run is not controlled by its parent r"},
		"not listed": {edit: func(_, r *v1alpha1.AgentRun) { r.Name = "r-b1-9" },
			want: "the parent r does not list the run among its branches"},
	} {
		t.Run(name, func(t *testing.T) {
			par := parent.DeepCopy()
			run := branchRunOf(parent, whole, 1, "uid-1", operatorUser)
			run.Spec.Limits = &shares[0]
			tc.edit(par, run)
			if got := workflow.CheckBranch(run, par, p); got != tc.want {
				t.Errorf("CheckBranch = %q; want %q", got, tc.want)
			}
		})
	}
}

// branching is the reconcile of a run that waits for its branches, at now, on plan p.
func branching(ctx context.Context, r *Reconciler, w *working, p *workflow.Plan, now time.Time) (ctrl.Result, error) {
	r.Clock.(*clocktesting.FakeClock).SetTime(now)
	f, err := r.gather(ctx, w, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	f.Plan = p
	return r.driveFrom(ctx, w, f)
}
