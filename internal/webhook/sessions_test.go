package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// The session the tests' turns are taken in: "chat" of namespace team-a, on the config
// "research".
const (
	chat     = "chat"
	research = "research"
)

// turnMarksRefused is what anyone but Baton who touches a turn's marks is told.
const turnMarksRefused = "the annotation agents.baton.dev/turn and the label agents.baton.dev/session are written only by Baton, when a turn is created: they put the turn in its place in its session"

// session is the AgentSession name of namespace ns, on the config research, that has numbered
// turns so far.
func session(name, ns string, numbered int32) *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	s.Spec.ConfigRef.Name = research
	s.Status.Numbered = numbered
	return s
}

// turnIn is the run named name, a turn of the session named, that names config ("" leaves
// configRef out, as kubectl baton chat does).
func turnIn(name, sessionName, config string) *v1alpha1.AgentRun {
	run := MakeRun(name, team).Config(config).Input("what did we find?").Obj()
	run.Spec.Session = &v1alpha1.SessionReference{Name: sessionName}
	return run
}

// numberedIn is how many turns the stored session named has numbered.
func numberedIn(t *testing.T, w *Decisions, name string) int32 {
	t.Helper()
	s := &v1alpha1.AgentSession{}
	if err := w.Client.Get(context.Background(), client.ObjectKey{Namespace: team, Name: name}, s); err != nil {
		t.Fatalf("reading the session %s: %v", name, err)
	}
	return s.Status.Numbered
}

// userInfo is the user name, a member of groups.
func userInfo(name string, groups []string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name, Groups: groups}
}

// wantTurn fails the test unless run was admitted as turn number n of the session chat, on
// its config.
func wantTurn(t *testing.T, run *v1alpha1.AgentRun, res admission.Response, n string) {
	t.Helper()
	if !res.Allowed {
		t.Fatalf("refused: %d %s", res.Result.Code, refusal(res))
	}
	if got := run.Annotations[v1alpha1.AnnotationTurn]; got != n {
		t.Errorf("turn annotation %q; want %q", got, n)
	}
	if got := run.Labels[v1alpha1.LabelSession]; got != chat {
		t.Errorf("session label %q; want %q", got, chat)
	}
	if run.Spec.ConfigRef.Name != research {
		t.Errorf("configRef %q; want the session's, %q", run.Spec.ConfigRef.Name, research)
	}
	if run.Spec.Session == nil || run.Spec.Session.Name != chat {
		t.Errorf("spec.session %v; want it kept", run.Spec.Session)
	}
}

// Whoever may get a session takes turns in it: each turn is given the session's config and
// the next number of the session, which the session counts, and the marks that put it in its
// place (the turn annotation, the session label), whatever the request said of them. The
// operator creates turns for the callers it authenticated without asking the API server.
func TestATurnIsNumberedInItsSession(t *testing.T) {
	for name, tc := range map[string]struct {
		user   string
		groups []string
		grants rbac
		down   error
		// edit changes the turns as the request carries them.
		edit func(*v1alpha1.AgentRun)
	}{
		"a person who may get the session": {user: "alice", grants: rbac{"alice": {"create", "get agentsessions/chat"}}},
		"a person who may get every session of the namespace": {user: "alice",
			grants: rbac{"alice": {"create", "get agentsessions"}}},
		"a member of a group that may get the session": {user: "alice", groups: []string{"chatters"},
			grants: rbac{"group:chatters": {"create", "get agentsessions/chat"}}},
		"the operator, for a caller it authenticated": {user: operatorUser,
			down: errors.New("the operator is not asked about")},
		"a turn that names its own number and another session's label": {user: "alice",
			grants: rbac{"alice": {"create", "get agentsessions/chat"}},
			edit: func(r *v1alpha1.AgentRun) {
				r.Annotations = map[string]string{v1alpha1.AnnotationTurn: "99"}
				r.Labels = map[string]string{v1alpha1.LabelSession: "other"}
			}},
		"a turn with labels and annotations of its own": {user: "alice",
			grants: rbac{"alice": {"create", "get agentsessions/chat"}},
			edit: func(r *v1alpha1.AgentRun) {
				r.Annotations = map[string]string{"example.com/ticket": "T-1"}
				r.Labels = map[string]string{"example.com/team": "payments"}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			w := webhookOn(t, &apiServer{rbac: tc.grants, down: tc.down}, session(chat, team, 0))
			for i, n := range []string{"1", "2"} {
				run := turnIn("turn-"+n, chat, "")
				if tc.edit != nil {
					tc.edit(run)
				}
				req := requestOf(t, admissionv1.Create, userInfo(tc.user, tc.groups), run, nil)
				res := w.Handle(context.Background(), req)
				stored := admitted(t, req, res)
				wantTurn(t, stored, res, n)
				if got := stored.Annotations[v1alpha1.AnnotationCreatedBy]; got != tc.user {
					t.Errorf("created-by %q; want %q", got, tc.user)
				}
				for k, v := range run.Annotations {
					if k != v1alpha1.AnnotationTurn && stored.Annotations[k] != v {
						t.Errorf("annotation %s is %q; want its own %q kept", k, stored.Annotations[k], v)
					}
				}
				for k, v := range run.Labels {
					if k != v1alpha1.LabelSession && stored.Labels[k] != v {
						t.Errorf("label %s is %q; want its own %q kept", k, stored.Labels[k], v)
					}
				}
				if got := numberedIn(t, w, chat); got != int32(i+1) {
					t.Errorf("after turn %s the session has numbered %d; want %d", n, got, i+1)
				}
			}
		})
	}
}

// The webhook asks the API server whether the creator of a turn may get its session, by name,
// in the turn's namespace.
func TestATurnAsksWhetherItsCreatorMayGetTheSession(t *testing.T) {
	s := &apiServer{rbac: rbac{"alice": {"get agentsessions/chat"}}}
	w := webhookOn(t, s, session(chat, team, 0))
	if _, res := createAs(t, w, "alice", turnIn("turn", chat, "")); !res.Allowed {
		t.Fatalf("refused: %s", refusal(res))
	}
	want := authorizationv1.ResourceAttributes{Namespace: team, Verb: "get", Group: v1alpha1.GroupVersion.Group,
		Resource: sessionResource, Name: chat}
	for _, asked := range s.asked {
		if asked.User == "alice" && asked.ResourceAttributes != nil && *asked.ResourceAttributes == want {
			return
		}
	}
	t.Fatalf("the webhook asked %+v; want it to ask whether alice may %+v", s.asked, want)
}

// Nobody takes a turn in a session they may not get, whatever they may do on runs: the refusal
// names the user, the session and the verb, says nothing of whether the session exists, and
// the session numbers nothing. Nothing is let through unchecked while the API server cannot
// answer.
func TestATurnIsRefusedToThoseWhoMayNotGetItsSession(t *testing.T) {
	const mayNot = `user "mallory" may not get AgentSession team-a/chat: taking a turn in a session needs the get verb on it`
	for name, tc := range map[string]struct {
		grants  rbac
		down    error
		session string
		code    int32
		refuse  string
	}{
		"a person who may create and get every run, but no session": {grants: rbac{"mallory": {"create", "get"}},
			code: 403, refuse: mayNot},
		"a person who may get a run named like the session": {grants: rbac{"mallory": {"create", "get chat"}},
			code: 403, refuse: mayNot},
		"a person who may get another session": {grants: rbac{"mallory": {"create", "get agentsessions/other"}},
			code: 403, refuse: mayNot},
		"a person who may do something else on the session": {grants: rbac{"mallory": {"create", "list agentsessions", "update agentsessions/chat"}},
			code: 403, refuse: mayNot},
		"a person who may not get a session that does not exist": {grants: rbac{"mallory": {"create"}}, session: "gone",
			code: 403, refuse: `user "mallory" may not get AgentSession team-a/gone: taking a turn in a session needs the get verb on it`},
		"a person who may get it, while the API server cannot answer": {grants: rbac{"mallory": {"get agentsessions/chat"}},
			down: errors.New("connection refused"), code: 500, refuse: "checking the get permission on agentsession chat: connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			w := webhookOn(t, &apiServer{rbac: tc.grants, down: tc.down}, session(chat, team, 3))
			target := chat
			if tc.session != "" {
				target = tc.session
			}
			stored, res := createAs(t, w, "mallory", turnIn("turn", target, ""))
			if res.Allowed || res.Result.Code != tc.code || res.Result.Message != tc.refuse {
				t.Fatalf("allowed %t, %d %q; want refused, %d %q", res.Allowed, res.Result.Code, refusal(res), tc.code, tc.refuse)
			}
			if stored != nil {
				t.Fatal("a refused turn was stored")
			}
			if got := numberedIn(t, w, chat); got != 3 {
				t.Fatalf("the session has numbered %d; want 3, as before", got)
			}
		})
	}
}

// A turn of a session that does not exist in the turn's namespace is refused, with what to do.
func TestATurnOfASessionThatDoesNotExistIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		user    string
		session string
		refuse  string
	}{
		"a person's turn of a session nobody created": {user: "alice", session: "gone",
			refuse: "AgentSession gone does not exist in namespace team-a: create it first (kubectl baton chat --new CONFIG does)"},
		"a person's turn of a session of another namespace": {user: "alice", session: "elsewhere",
			refuse: "AgentSession elsewhere does not exist in namespace team-a: create it first (kubectl baton chat --new CONFIG does)"},
		"the operator's turn of a session nobody created": {user: operatorUser, session: "gone",
			refuse: "AgentSession gone does not exist in namespace team-a: create it first (kubectl baton chat --new CONFIG does)"},
	} {
		t.Run(name, func(t *testing.T) {
			w := testWebhook(t, rbac{"alice": {"create", "get agentsessions"}}, session(chat, team, 0), session("elsewhere", "team-b", 0))
			_, res := createAs(t, w, tc.user, turnIn("turn", tc.session, ""))
			if res.Allowed || res.Result.Code != 403 || res.Result.Message != tc.refuse {
				t.Fatalf("allowed %t, %d %q; want refused, 403 %q", res.Allowed, res.Result.Code, refusal(res), tc.refuse)
			}
		})
	}
}

// A turn runs its session's config: configRef defaults to it, may name it, and may name no
// other; a turn refused for it takes no number.
func TestATurnRunsItsSessionsConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		config string
		refuse string
	}{
		"a turn that leaves configRef out":       {config: ""},
		"a turn that names the session's config": {config: research},
		"a turn that names another config": {config: "cheaper",
			refuse: "spec.configRef: a turn of AgentSession chat runs its config research, not cheaper; leave configRef out or name research"},
	} {
		t.Run(name, func(t *testing.T) {
			w := testWebhook(t, rbac{"alice": {"create", "get agentsessions/chat"}}, session(chat, team, 0))
			stored, res := createAs(t, w, "alice", turnIn("turn", chat, tc.config))
			if tc.refuse != "" {
				if res.Allowed || res.Result.Code != 403 || res.Result.Message != tc.refuse {
					t.Fatalf("allowed %t, %d %q; want refused, 403 %q", res.Allowed, res.Result.Code, refusal(res), tc.refuse)
				}
				if got := numberedIn(t, w, chat); got != 0 {
					t.Fatalf("the session has numbered %d; want 0", got)
				}
				return
			}
			wantTurn(t, stored, res, "1")
		})
	}
}

// A dry run of a turn (kubectl create --dry-run=server) shows the number the turn would get,
// and the session counts nothing: the next real turn gets that number.
func TestADryRunOfATurnNumbersItAndCountsNothing(t *testing.T) {
	for name, user := range map[string]string{
		"a person's dry run":     "alice",
		"the operator's dry run": operatorUser,
	} {
		t.Run(name, func(t *testing.T) {
			updates := 0
			s := &apiServer{rbac: rbac{"alice": {"create", "get agentsessions/chat"}},
				statusUpdate: func(ctx context.Context, store client.Client, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					updates++
					return store.Status().Update(ctx, obj, opts...)
				}}
			w := webhookOn(t, s, session(chat, team, 3))
			req := request(t, admissionv1.Create, user, turnIn("turn", chat, ""), nil)
			req.DryRun = ptr.To(true)
			res := w.Handle(context.Background(), req)
			wantTurn(t, admitted(t, req, res), res, "4")
			if got := numberedIn(t, w, chat); got != 3 || updates != 0 {
				t.Fatalf("after the dry run the session has numbered %d, in %d status updates; want 3, in none", got, updates)
			}
			real, res := createAs(t, w, user, turnIn("turn", chat, ""))
			wantTurn(t, real, res, "4")
			if got := numberedIn(t, w, chat); got != 4 {
				t.Fatalf("after the turn the session has numbered %d; want 4", got)
			}
		})
	}
}

// Two turns created at once, through two replicas of the webhook, each get their own number:
// the replica whose count of the session is stale is refused by the API server (the
// resourceVersion it wrote with is old), reads the session again and takes the next number. A
// session whose count cannot be written leaves the turn refused, never admitted unnumbered.
func TestTurnsCreatedAtOnceGetNumbersOfTheirOwn(t *testing.T) {
	for name, tc := range map[string]struct {
		// racing is how many of the webhook's status updates another replica's lands just
		// before; -1 for all of them.
		racing int
		want   string
		// numbered is what the session has numbered after; updates how many status updates
		// the webhook sent.
		numbered int32
		updates  int
		refuse   string
	}{
		"no other turn at the same time":          {racing: 0, want: "5", numbered: 5, updates: 1},
		"another replica numbers a turn between":  {racing: 1, want: "6", numbered: 6, updates: 2},
		"two other replicas, one after the other": {racing: 2, want: "7", numbered: 7, updates: 3},
		"the session's count cannot be written":   {racing: -1, refuse: "numbering the turn in agentsession chat: "},
	} {
		t.Run(name, func(t *testing.T) {
			updates := 0
			var conflicts []error
			s := &apiServer{rbac: rbac{"alice": {"create", "get agentsessions/chat"}}}
			s.statusUpdate = func(ctx context.Context, store client.Client, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				updates++
				if tc.racing < 0 || updates <= tc.racing {
					// Another replica numbers a turn first: the session, as stored, moves on.
					other := &v1alpha1.AgentSession{}
					if err := store.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
						return err
					}
					other.Status.Numbered++
					if err := store.Status().Update(ctx, other); err != nil {
						t.Fatalf("the other replica's update: %v", err)
					}
				}
				err := store.Status().Update(ctx, obj, opts...)
				if tc.racing < 0 || updates <= tc.racing {
					conflicts = append(conflicts, err)
				}
				return err
			}
			w := webhookOn(t, s, session(chat, team, 4))
			stored, res := createAs(t, w, "alice", turnIn("turn", chat, ""))
			for _, err := range conflicts {
				if !apierrors.IsConflict(err) {
					t.Fatalf("the webhook's stale update was answered %v; want a conflict: it must write with the resourceVersion it read", err)
				}
			}
			if tc.refuse != "" {
				if res.Allowed || res.Result.Code != 500 || !strings.HasPrefix(res.Result.Message, tc.refuse) {
					t.Fatalf("allowed %t, %d %q; want refused, 500 %q...", res.Allowed, res.Result.Code, refusal(res), tc.refuse)
				}
				if updates < 2 {
					t.Fatalf("the webhook sent %d status updates; want it to try again on a conflict", updates)
				}
				return
			}
			wantTurn(t, stored, res, tc.want)
			if got := numberedIn(t, w, chat); got != tc.numbered || updates != tc.updates {
				t.Fatalf("the session has numbered %d, in %d status updates; want %d, in %d", got, updates, tc.numbered, tc.updates)
			}
		})
	}
}

// A turn's marks are written once, when it is created: nobody but the operator sets, changes
// or removes its number or its session label later, on a turn or on any run, a cluster admin
// no more than its creator. Other changes of a turn's labels and annotations go on.
func TestATurnsMarksAreWrittenByBatonAlone(t *testing.T) {
	turn := func() *v1alpha1.AgentRun {
		run := turnIn("turn-2", chat, research)
		run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice", v1alpha1.AnnotationTurn: "2"}
		run.Labels = map[string]string{v1alpha1.LabelSession: chat}
		return run
	}
	plain := func() *v1alpha1.AgentRun {
		run := MakeRun("plain", team).Config(research).Obj()
		run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}
		return run
	}
	for name, tc := range map[string]struct {
		old  func() *v1alpha1.AgentRun
		edit func(*v1alpha1.AgentRun)
		// refused says whether the edit is refused to people; the operator may make them all.
		refused bool
	}{
		"a turn moved ahead": {old: turn, refused: true,
			edit: func(r *v1alpha1.AgentRun) { r.Annotations[v1alpha1.AnnotationTurn] = "1" }},
		"a turn's number removed": {old: turn, refused: true,
			edit: func(r *v1alpha1.AgentRun) { delete(r.Annotations, v1alpha1.AnnotationTurn) }},
		"a turn moved to another session's label": {old: turn, refused: true,
			edit: func(r *v1alpha1.AgentRun) { r.Labels[v1alpha1.LabelSession] = "other" }},
		"a turn's session label removed": {old: turn, refused: true,
			edit: func(r *v1alpha1.AgentRun) { delete(r.Labels, v1alpha1.LabelSession) }},
		"a turn's session label emptied": {old: turn, refused: true,
			edit: func(r *v1alpha1.AgentRun) { r.Labels[v1alpha1.LabelSession] = "" }},
		"a run given a turn number later": {old: plain, refused: true,
			edit: func(r *v1alpha1.AgentRun) { r.Annotations[v1alpha1.AnnotationTurn] = "1" }},
		"a run given a session label later": {old: plain, refused: true,
			edit: func(r *v1alpha1.AgentRun) { r.Labels = map[string]string{v1alpha1.LabelSession: chat} }},
		"a turn's other annotation and label changed": {old: turn, edit: func(r *v1alpha1.AgentRun) {
			r.Annotations["example.com/ticket"] = "T-1"
			r.Labels["example.com/team"] = "payments"
		}},
	} {
		for _, user := range []string{"alice", "kubernetes-admin", operatorUser} {
			t.Run(name+", by "+user, func(t *testing.T) {
				w := testWebhook(t, rbac{"alice": {"create", "get", "update", "get agentsessions"}}, session(chat, team, 2))
				old := tc.old()
				run := old.DeepCopy()
				tc.edit(run)
				req := request(t, admissionv1.Update, user, run, old)
				res := w.Handle(context.Background(), req)
				if tc.refused && user != operatorUser {
					if res.Allowed || res.Result.Code != 403 || res.Result.Message != turnMarksRefused {
						t.Fatalf("allowed %t, %d %q; want refused, 403 %q", res.Allowed, res.Result.Code, refusal(res), turnMarksRefused)
					}
					return
				}
				stored := admitted(t, req, res)
				if stored == nil {
					t.Fatalf("refused: %s", refusal(res))
				}
				if stored.Annotations[v1alpha1.AnnotationTurn] != run.Annotations[v1alpha1.AnnotationTurn] ||
					stored.Labels[v1alpha1.LabelSession] != run.Labels[v1alpha1.LabelSession] {
					t.Fatalf("stored with turn %q and session label %q; want the update's, %q and %q",
						stored.Annotations[v1alpha1.AnnotationTurn], stored.Labels[v1alpha1.LabelSession],
						run.Annotations[v1alpha1.AnnotationTurn], run.Labels[v1alpha1.LabelSession])
				}
				if got := numberedIn(t, w, chat); got != 2 {
					t.Fatalf("the session has numbered %d; want 2: an update numbers nothing", got)
				}
			})
		}
	}
}

// A run that is no turn (no spec.session) is created as before: no turn marks, its configRef
// as written, and no session is read or counts it.
func TestARunThatIsNoTurnGetsNoTurnMarks(t *testing.T) {
	for name, user := range map[string]string{
		"a person's run":     "alice",
		"the operator's run": operatorUser,
	} {
		t.Run(name, func(t *testing.T) {
			s := &apiServer{rbac: rbac{"alice": {"create"}}}
			w := webhookOn(t, s, session(chat, team, 3))
			stored, res := createAs(t, w, user, MakeRun("plain", team).Config("other").Obj())
			if !res.Allowed {
				t.Fatalf("refused: %s", refusal(res))
			}
			if _, ok := stored.Annotations[v1alpha1.AnnotationTurn]; ok {
				t.Errorf("a run that is no turn was numbered %q", stored.Annotations[v1alpha1.AnnotationTurn])
			}
			if _, ok := stored.Labels[v1alpha1.LabelSession]; ok {
				t.Errorf("a run that is no turn was labelled with session %q", stored.Labels[v1alpha1.LabelSession])
			}
			if stored.Spec.ConfigRef.Name != "other" || stored.Spec.Session != nil {
				t.Errorf("configRef %q, session %v; want %q, none", stored.Spec.ConfigRef.Name, stored.Spec.Session, "other")
			}
			for _, asked := range s.asked {
				if asked.ResourceAttributes != nil && asked.ResourceAttributes.Resource == sessionResource {
					t.Errorf("asked about a session: %+v", asked.ResourceAttributes)
				}
			}
			if got := numberedIn(t, w, chat); got != 3 {
				t.Errorf("the session has numbered %d; want 3, as before", got)
			}
		})
	}
}

// A run that is no turn may not carry a turn's marks: a label selector for a session's turns
// lists its turns alone. The operator's runs are its own to mark.
func TestARunThatIsNoTurnMayNotCarryTurnMarks(t *testing.T) {
	for name, mark := range map[string]func(*v1alpha1.AgentRun){
		"a turn number":   func(r *v1alpha1.AgentRun) { r.Annotations = map[string]string{v1alpha1.AnnotationTurn: "1"} },
		"a session label": func(r *v1alpha1.AgentRun) { r.Labels = map[string]string{v1alpha1.LabelSession: chat} },
	} {
		t.Run(name, func(t *testing.T) {
			w := webhookOn(t, &apiServer{rbac: rbac{"alice": {"create"}}}, session(chat, team, 0))
			run := MakeRun("fake-turn", team).Config(research).Obj()
			mark(run)
			_, res := createAs(t, w, "alice", run)
			if res.Allowed || !strings.Contains(refusal(res), "are written only by Baton, on a turn of a session") {
				t.Errorf("admitted, or refused for another reason: %s", refusal(res))
			}
		})
	}
}

// A session's name longer than a label value is labelled with its beginning and a digest: the
// turn is admitted with a label the API server takes.
func TestATurnOfASessionWithALongNameIsLabelledWithinBounds(t *testing.T) {
	long := strings.Repeat("conversation-", 8) + "about-the-invoice"
	w := webhookOn(t, &apiServer{rbac: rbac{"alice": {"create", "get agentsessions/" + long}}}, session(long, team, 0))
	stored, res := createAs(t, w, "alice", turnIn("t1", long, ""))
	if !res.Allowed {
		t.Fatalf("refused: %s", refusal(res))
	}
	label := stored.Labels[v1alpha1.LabelSession]
	if errs := validation.IsValidLabelValue(label); len(errs) > 0 || !strings.HasPrefix(label, "conversation-") {
		t.Errorf("session label %q: %v", label, errs)
	}
	if stored.Annotations[v1alpha1.AnnotationTurn] != "1" {
		t.Errorf("turn %q, want 1", stored.Annotations[v1alpha1.AnnotationTurn])
	}
}

// A run that reads a turn (spec.from, spec.replay) reads its session's history: its creator
// must be allowed to get the session as well as the turn.
func TestARunThatReadsATurnNeedsGetOnItsSession(t *testing.T) {
	earlier := turnIn("chat-t1", chat, research)
	for name, tc := range map[string]struct {
		grants  []string
		allowed bool
	}{
		"someone who may get the turn, not its session": {grants: []string{"create", "get"}},
		"someone who may get both":                      {grants: []string{"create", "get", "get agentsessions/" + chat}, allowed: true},
	} {
		for field, read := range map[string]func(*v1alpha1.AgentRun){
			"spec.from":   func(r *v1alpha1.AgentRun) { r.Spec.From = &v1alpha1.RunFrom{Run: "chat-t1", Step: 1} },
			"spec.replay": func(r *v1alpha1.AgentRun) { r.Spec.Replay = &v1alpha1.RunReplay{Run: "chat-t1"} },
		} {
			t.Run(name+", by "+field, func(t *testing.T) {
				w := webhookOn(t, &apiServer{rbac: rbac{"alice": tc.grants}}, session(chat, team, 1), earlier)
				run := MakeRun("reader", team).Config(research).Obj()
				read(run)
				_, res := createAs(t, w, "alice", run)
				if res.Allowed != tc.allowed {
					t.Fatalf("allowed %v (%s); want %v", res.Allowed, refusal(res), tc.allowed)
				}
				if !tc.allowed && !strings.Contains(refusal(res), `may not get AgentSession team-a/`+chat+`, whose turn chat-t1 `+field+` names`) {
					t.Errorf("refusal %q", refusal(res))
				}
			})
		}
	}
}

// A reply to a turn waiting for input is the conversation's next line: it needs get on the
// session, as taking a turn does; without it the reply is refused and nothing is queued.
func TestAReplyToATurnNeedsGetOnItsSession(t *testing.T) {
	waiting := func() *v1alpha1.AgentRun {
		run := turnIn("chat-t2", chat, research)
		run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice", v1alpha1.AnnotationTurn: "2"}
		run.Status.Phase = v1alpha1.PhaseAwaitingInput
		return run
	}
	for name, tc := range map[string]struct {
		grants rbac
		refuse string
	}{
		"a person who may get the session": {grants: rbac{"bob": {"update", "get agentsessions/chat"}}},
		"a person who may edit runs, not the session": {grants: rbac{"bob": {"update", "get"}},
			refuse: `user "bob" may not get AgentSession team-a/chat: replying to its turn chat-t2 needs the get verb on it, as taking a turn does`},
	} {
		t.Run(name, func(t *testing.T) {
			w := webhookOn(t, &apiServer{rbac: tc.grants}, session(chat, team, 2))
			stored, res := annotate(t, w, "bob", waiting(), v1alpha1.AnnotationReply, "yes, go ahead")
			if tc.refuse == "" {
				if !res.Allowed || len(queueOf(t, stored)) != 1 {
					t.Fatalf("refused %q; want the reply queued", refusal(res))
				}
				return
			}
			if res.Allowed || refusal(res) != tc.refuse {
				t.Fatalf("allowed %t %q; want refused %q", res.Allowed, refusal(res), tc.refuse)
			}
		})
	}
}
