package webhook

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// createdByRefused is what anyone but Baton who touches a run's created-by annotation is told.
const createdByRefused = "the annotation agents.baton.dev/created-by is written only by Baton, when the run is created: it records who created the run, and nobody may set, change or remove it"

// Who created a run is recorded when it is created, whatever the request says, except that the
// operator names the callers it creates runs for; afterwards nobody but the operator may set,
// change or remove it, a cluster admin no more than anyone. Other writes go on as before.
func TestTheCreatorOfARunIsRecordedByBatonAlone(t *testing.T) {
	const a2aCaller = "system:serviceaccount:ops:caller"
	createdBy := func(who string) map[string]string { return map[string]string{v1alpha1.AnnotationCreatedBy: who} }
	for name, tc := range map[string]struct {
		user string
		// named is the creator the request names on a create; edit, when set, is user's
		// annotate of the run alice created.
		named  string
		edit   []string
		want   map[string]string
		refuse string
	}{
		"a person's run": {user: "alice", want: createdBy("alice")},
		"a person's run that names another creator": {user: "alice", named: "bob", want: createdBy("alice")},
		"the operator's run for a caller it names":  {user: operatorUser, named: a2aCaller, want: createdBy(a2aCaller)},
		"the operator's own run":                    {user: operatorUser, want: createdBy(operatorUser)},
		"the creator names another later":           {user: "alice", edit: []string{v1alpha1.AnnotationCreatedBy, "bob"}, refuse: createdByRefused},
		"the creator removes it":                    {user: "alice", edit: []string{v1alpha1.AnnotationCreatedBy + "-"}, refuse: createdByRefused},
		"a cluster admin changes it":                {user: "kubernetes-admin", edit: []string{v1alpha1.AnnotationCreatedBy, "bob"}, refuse: createdByRefused},
		"the operator takes it off":                 {user: operatorUser, edit: []string{v1alpha1.AnnotationCreatedBy + "-"}},
		"the creator writes an annotation of her own": {user: "alice", edit: []string{"example.com/team", "payments"},
			want: map[string]string{v1alpha1.AnnotationCreatedBy: "alice", "example.com/team": "payments"}},
	} {
		t.Run(name, func(t *testing.T) {
			w := testWebhook(t, nil)
			run := MakeRun("r", team).Config("absent").Obj()
			if tc.named != "" {
				run.Annotations = createdBy(tc.named)
			}
			creator := tc.user
			if tc.edit != nil {
				creator = "alice"
			}
			stored, res := createAs(t, w, creator, run)
			if tc.edit != nil && res.Allowed {
				stored, res = annotate(t, w, tc.user, stored, tc.edit...)
			}
			switch {
			case tc.refuse != "":
				if refusal(res) != tc.refuse {
					t.Fatalf("refusal %q; want %q", refusal(res), tc.refuse)
				}
			case !res.Allowed:
				t.Fatalf("refused: %s", refusal(res))
			default:
				if diff := cmp.Diff(tc.want, stored.Annotations, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("annotations (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// A run that reads another run of the namespace (spec.from continues it, spec.replay replays
// it) is created only by someone who may get that run, as its transcript is theirs alone to
// read. The operator's own runs are not asked about, and nothing is let through unchecked while
// the API server cannot answer.
func TestARunThatReadsAnotherIsCreatedOnlyBySomeoneWhoMayGetIt(t *testing.T) {
	// dana may create runs, and get only her own.
	dana := rbac{"dana": {"create", "get danas"}}
	from := func(other string) *v1alpha1.AgentRun {
		run := MakeRun("resume", team).Config("open").Obj()
		run.Spec.From = &v1alpha1.RunFrom{Run: other, Step: 1}
		return run
	}
	replay := func(other string) *v1alpha1.AgentRun {
		run := MakeRun("peek", team).Config("open").Obj()
		run.Spec.Replay = &v1alpha1.RunReplay{Run: other}
		return run
	}
	for name, tc := range map[string]struct {
		user   string
		run    *v1alpha1.AgentRun
		down   error
		code   int32
		refuse string
	}{
		"a run from a run she may get":    {user: "dana", run: from("danas")},
		"a replay of a run she may get":   {user: "dana", run: replay("danas")},
		"a run of no other run":           {user: "dana", run: MakeRun("plain", team).Config("open").Obj()},
		"the operator's run from any run": {user: operatorUser, run: from("recorded"), down: errors.New("not asked")},
		"a run from a run she may not get": {user: "dana", run: from("recorded"), code: 403,
			refuse: `user "dana" may not get AgentRun team-a/recorded, which spec.from names: a run that reads another run's transcript needs the get verb on it`},
		"a replay of a run she may not get": {user: "dana", run: replay("recorded"), code: 403,
			refuse: `user "dana" may not get AgentRun team-a/recorded, which spec.replay names: a run that reads another run's transcript needs the get verb on it`},
		"a run from a run while the API server cannot answer": {user: "dana", run: from("danas"), down: errors.New("connection refused"), code: 500,
			refuse: "checking the get permission on agentrun danas: connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			w := webhookOn(t, &apiServer{rbac: dana, down: tc.down})
			_, res := createAs(t, w, tc.user, tc.run)
			switch {
			case tc.refuse == "" && !res.Allowed:
				t.Fatalf("refused: %s", refusal(res))
			case tc.refuse != "" && (res.Allowed || res.Result.Code != tc.code || res.Result.Message != tc.refuse):
				t.Fatalf("allowed %t, %d %q; want refused, %d %q", res.Allowed, res.Result.Code, refusal(res), tc.code, tc.refuse)
			}
		})
	}
}
