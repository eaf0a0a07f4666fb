package console

import (
	"net/http"
	"net/url"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/workflow"
)

// A session is shown as one conversation: each turn's question, who asked it, and the team's
// answer, or where the turn is (working, waiting at a gate, asking, queued behind the turn
// before), with its tokens and cost, oldest first. The session is read first, with the user's
// credentials: who may not get it sees none of its turns. The turns' answers are read from
// their status, so a long session costs one list, not a transcript read per turn.

// maxTurnsShown bounds the turns a session page shows: the latest.
const maxTurnsShown = 50

type sessionsView struct {
	page
	Sessions []v1alpha1.AgentSession
}

type sessionView struct {
	page
	Session *v1alpha1.AgentSession
	Turns   []turnView
	// LeftOut counts the earlier turns not shown.
	LeftOut int
}

// turnView is one turn of the conversation.
type turnView struct {
	Run   *v1alpha1.AgentRun
	Phase v1alpha1.RunPhase
	Asker string
	Queue *metav1.Condition
}

func (s *Server) sessionsPage(w http.ResponseWriter, r *http.Request) {
	v := sessionsView{page: s.page(r, "Sessions", "sessions")}
	for _, ns := range s.scopes.get(r.Context()) {
		var list v1alpha1.AgentSessionList
		if err := s.opts.Kube.List(r.Context(), &list, client.InNamespace(ns)); err != nil {
			v.Errors = append(v.Errors, apiMessage(err))
			continue
		}
		v.Sessions = append(v.Sessions, list.Items...)
	}
	slices.SortFunc(v.Sessions, func(a, b v1alpha1.AgentSession) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	v.Sessions = v.Sessions[:min(len(v.Sessions), maxRuns)]
	s.render(w, http.StatusOK, "sessions", v)
}

func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	v := sessionView{page: s.page(r, name, "sessions")}
	session := &v1alpha1.AgentSession{}
	if err := s.opts.Kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, session); err != nil {
		v.Errors = append(v.Errors, apiMessage(err))
		s.render(w, statusOf(err), "session", v)
		return
	}
	v.Session = session
	var turns v1alpha1.AgentRunList
	if err := s.opts.Kube.List(ctx, &turns, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LabelSession: workflow.LabelValue(name)}); err != nil {
		v.Errors = append(v.Errors, apiMessage(err))
	}
	runview.SortTurns(turns.Items)
	v.LeftOut = max(len(turns.Items)-maxTurnsShown, 0)
	for i := range turns.Items[v.LeftOut:] {
		run := &turns.Items[v.LeftOut+i]
		if run.Spec.Session == nil || run.Spec.Session.Name != name {
			continue // a label value cut to fit, shared by another session's name
		}
		v.Turns = append(v.Turns, turnView{Run: run, Phase: runview.Phase(run), Asker: run.Annotations[v1alpha1.AnnotationCreatedBy], Queue: queueOf(run)})
	}
	v.Live = "/live?" + url.Values{"watch": {"runs"}, "namespace": {namespace}, "rv": {turns.ResourceVersion}}.Encode()
	s.render(w, http.StatusOK, "session", v)
}
