package console

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
)

// maxForm bounds a form's body.
const maxForm = 128 << 10

// maxInput is the longest input a run takes (spec.input).
const maxInput = 32768

// decide makes a person's decision on a run, as the annotations kubectl users write: approve,
// reject (ending the run), revise (back to an agent, or replan), reply, or cancel. The API
// server's answer is shown as it gave it; the operator's (applied, or refused and why) shows in
// the run's Decision condition on the run's page.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.refused(w, r, namespace, name, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	f := r.PostForm
	set, notice, problem := decisionAnnotations(f)
	if problem != "" {
		s.refused(w, r, namespace, name, http.StatusBadRequest, problem)
		return
	}
	run := &v1alpha1.AgentRun{}
	if err := s.opts.Kube.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, run); err != nil {
		s.refused(w, r, namespace, name, statusOf(err), apiMessage(err))
		return
	}
	if moved := movedOn(run, f); moved != "" {
		s.refused(w, r, namespace, name, http.StatusConflict, moved)
		return
	}
	orig := run.DeepCopy()
	if run.Annotations == nil {
		run.Annotations = map[string]string{}
	}
	maps.Copy(run.Annotations, set)
	if err := s.opts.Kube.Patch(r.Context(), run, client.MergeFrom(orig)); err != nil {
		s.refused(w, r, namespace, name, statusOf(err), apiMessage(err))
		return
	}
	// A decision made in the inbox goes back there; any other, to the run's page.
	back := "/runs/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	if f.Get("back") == "/inbox" {
		back = "/inbox"
	}
	http.Redirect(w, r, back+"?"+url.Values{"notice": {notice}}.Encode(), http.StatusSeeOther)
}

// movedOn says how the run moved on from the gate the user judged, if it did: a decision is
// for the gate as the user saw it (the form carries the time it opened), never for a later
// opening of a gate of the same name, with other output to judge.
func movedOn(run *v1alpha1.AgentRun, f url.Values) string {
	action, gate, since := f.Get("action"), f.Get("gate"), f.Get("since")
	if action != "approve" && action != "reject" && action != "revise" || since == "" {
		return ""
	}
	p := run.Status.PendingApproval
	switch {
	case run.Status.Phase != v1alpha1.PhaseAwaitingApproval || p == nil:
		return fmt.Sprintf("Nothing was sent: the run no longer waits at gate %s (it is %s). Look at it again before you decide.", gate, runview.Phase(run))
	case p.Gate != gate || stamp(p.Since.Time) != since:
		return fmt.Sprintf("Nothing was sent: the run moved on from the gate you judged; it waits at gate %s since %s, with new output to judge. Look at it again before you decide.",
			p.Gate, p.Since.UTC().Format(time.RFC3339))
	}
	return ""
}

// text is a form field's text as the user typed it: browsers send a textarea's line breaks as
// CRLF, which would count twice against a limit and reach the agents with stray CRs.
func text(f url.Values, field string) string {
	return strings.ReplaceAll(f.Get(field), "\r\n", "\n")
}

// decisionAnnotations are the annotations a decision form asks for, what to tell the user once
// they are written, or what is wrong with the form, naming the field.
func decisionAnnotations(f url.Values) (map[string]string, string, string) {
	action, gate := f.Get("action"), f.Get("gate")
	feedback, reply, revise := strings.TrimSpace(text(f, "feedback")), strings.TrimSpace(text(f, "reply")), f.Get("revise")
	for field, v := range map[string]string{"feedback": feedback, "reply": reply, "reason": text(f, "reason")} {
		if n := utf8.RuneCountInString(v); n > decisions.MaxValue {
			return nil, "", fmt.Sprintf("%s: must be at most %d characters (it has %d)", field, decisions.MaxValue, n)
		}
	}
	sent := "The operator applies it in turn; what became of it shows under Decision."
	switch action {
	case "approve", "reject", "revise":
		if gate == "" {
			return nil, "", "gate: name the gate the run waits at"
		}
	}
	switch action {
	case "approve":
		return decisions.Annotations(decisions.Queued{Action: decisions.Approve, Gate: gate, Feedback: feedback}),
			fmt.Sprintf("Your approval of gate %s was sent. %s", gate, sent), ""
	case "reject":
		return decisions.Annotations(decisions.Queued{Action: decisions.Reject, Gate: gate, Feedback: feedback}),
			fmt.Sprintf("Your rejection of gate %s was sent: the run ends Rejected. %s", gate, sent), ""
	case "revise":
		if revise == "" {
			return nil, "", "revise: choose the agent that revises, or replan"
		}
		if feedback == "" {
			return nil, "", "feedback: say what to change"
		}
		return decisions.Annotations(decisions.Queued{Action: decisions.Reject, Gate: gate, Revise: revise, Feedback: feedback}),
			fmt.Sprintf("Gate %s was sent back to %s with your feedback. %s", gate, revise, sent), ""
	case "reply":
		if reply == "" {
			return nil, "", "reply: write the answer"
		}
		return decisions.Annotations(decisions.Queued{Action: decisions.Reply, Reply: reply, Feedback: feedback}), "Your answer was sent. " + sent, ""
	case "cancel":
		reason := strings.TrimSpace(text(f, "reason"))
		if reason == "" {
			reason = "cancelled in the console"
		}
		return map[string]string{v1alpha1.AnnotationCancel: reason}, "The run was asked to stop: it ends Cancelled.", ""
	}
	return nil, "", fmt.Sprintf("action: %q is not one of approve, reject, revise, reply or cancel", action)
}

// refused shows the run's page again with what stopped the action, and the form as it was
// sent, so nothing the user wrote is lost.
func (s *Server) refused(w http.ResponseWriter, r *http.Request, namespace, name string, status int, message string) {
	v, _ := s.runView(r, namespace, name)
	v.Errors = append(v.Errors, message)
	v.Form = r.PostForm
	v.Self = "/runs/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	s.render(w, status, "run", v)
}

// retry starts a new run with the run's config, input, limits and approvals, or, with a step,
// one that goes on from where the run was after that step (spec.from), paying for none of the
// steps before it.
func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.refused(w, r, namespace, name, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	var from int64
	if raw := r.PostForm.Get("step"); raw != "" {
		var err error
		if from, err = strconv.ParseInt(raw, 10, 32); err != nil || from < 1 {
			s.refused(w, r, namespace, name, http.StatusBadRequest, "step: must be a whole number from 1")
			return
		}
	}
	old := &v1alpha1.AgentRun{}
	if err := s.opts.Kube.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, old); err != nil {
		s.refused(w, r, namespace, name, statusOf(err), apiMessage(err))
		return
	}
	run := records.Retry(old, int32(from))
	notice := "Started again from the beginning."
	if from > 0 {
		notice = fmt.Sprintf("Started from where %s was after step %d.", name, from)
	}
	if err := s.opts.Kube.Create(r.Context(), run); err != nil {
		s.refused(w, r, namespace, name, statusOf(err), apiMessage(err))
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(namespace)+"/"+url.PathEscape(run.Name)+"?"+url.Values{"notice": {notice}}.Encode(), http.StatusSeeOther)
}

// start creates a run of a config with the input the user typed.
func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	v := newView{page: s.page(r, "New run", "new")}
	if err := r.ParseForm(); err != nil {
		v.Errors = append(v.Errors, "the form could not be read: "+err.Error())
		s.renderNew(w, r, http.StatusBadRequest, v)
		return
	}
	f := r.PostForm
	v.Namespace, v.Input, v.Name, v.Approvals = f.Get("namespace"), text(f, "input"), strings.TrimSpace(f.Get("name")), f.Get("approvals")
	v.Self = "/new"
	if ns, cfg, ok := strings.Cut(f.Get("config"), "/"); ok {
		v.Namespace, v.Config = ns, cfg
	}
	problem := ""
	switch {
	case v.Config == "":
		problem = "config: choose the AgentConfig to run"
	case strings.TrimSpace(v.Input) == "":
		problem = "input: write what the agents are to do"
	case utf8.RuneCountInString(v.Input) > maxInput:
		problem = fmt.Sprintf("input: must be at most %d characters", maxInput)
	case v.Approvals != "" && v.Approvals != string(v1alpha1.ApprovalsSkip):
		problem = "approvals: leave it empty, or Skip"
	}
	if problem != "" {
		v.Errors = append(v.Errors, problem)
		s.renderNew(w, r, http.StatusBadRequest, v)
		return
	}
	run := &v1alpha1.AgentRun{Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: v.Config}, Input: v.Input,
		Approvals: v1alpha1.ApprovalPolicy(v.Approvals)}}
	run.Namespace = v.Namespace
	if v.Name != "" {
		run.Name = v.Name
	} else {
		run.GenerateName = v.Config + "-"
	}
	if err := s.opts.Kube.Create(r.Context(), run); err != nil {
		v.Errors = append(v.Errors, apiMessage(err))
		s.renderNew(w, r, statusOf(err), v)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(run.Namespace)+"/"+url.PathEscape(run.Name)+"?"+
		url.Values{"notice": {"Run " + run.Name + " created."}}.Encode(), http.StatusSeeOther)
}
