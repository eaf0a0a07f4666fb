package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/textbound"
)

// phases are the phases a run list can be filtered by, in the order a run goes through them.
var phases = []v1alpha1.RunPhase{v1alpha1.PhasePending, v1alpha1.PhaseQueued, v1alpha1.PhaseRunning,
	v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseAwaitingInput, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed,
	v1alpha1.PhaseCancelled}

type runsView struct {
	page
	// Rows are the runs listed, each run's branches under it.
	Rows                 []runRow
	Namespaces, Configs  []string
	Phases               []v1alpha1.RunPhase
	Namespace, Config    string
	Phase                v1alpha1.RunPhase
	Total, Shown, Hidden int
	// Branches is "hide" when the list leaves branches out, and BranchesLeftOut counts them.
	Branches        string
	BranchesLeftOut int
	// Queued counts the runs listed that wait in their namespace's queue, and QueuedURL lists
	// only them.
	Queued    int
	QueuedURL string
}

// runsPage lists runs, filtered by namespace, config and phase, each run's branches under it
// (or, with branches=hide, without branches).
func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := runsView{page: s.page(r, "Runs", "runs"), Phases: phases,
		Namespace: q.Get("namespace"), Config: q.Get("config"), Phase: v1alpha1.RunPhase(q.Get("phase"))}
	if q.Get("branches") == hideBranches {
		v.Branches = hideBranches
	}
	all, version, errs := s.listRuns(r.Context(), v.Namespace)
	v.Live = "/live?" + url.Values{"watch": {"runs"}, "namespace": {v.Namespace}, "rv": {version}}.Encode()
	for _, err := range errs {
		v.Errors = append(v.Errors, apiMessage(err))
	}
	configs := map[string]bool{}
	var listed []v1alpha1.AgentRun
	for _, run := range all {
		configs[run.Spec.ConfigRef.Name] = true
		if v.Config != "" && run.Spec.ConfigRef.Name != v.Config || v.Phase != "" && runview.Phase(&run) != v.Phase {
			continue
		}
		if v.Branches == hideBranches && runview.BranchOf(&run) != nil {
			v.BranchesLeftOut++
			continue
		}
		v.Total++
		if runview.Phase(&run) == v1alpha1.PhaseQueued {
			v.Queued++
		}
		listed = append(listed, run)
	}
	v.Rows = treeRows(listed)
	v.Rows = v.Rows[:min(len(v.Rows), maxRuns)]
	v.Shown, v.Hidden = len(v.Rows), v.Total-len(v.Rows)
	queued := url.Values{"namespace": {v.Namespace}, "config": {v.Config}, "phase": {string(v1alpha1.PhaseQueued)}}
	if v.Branches != "" {
		queued.Set("branches", v.Branches)
	}
	v.QueuedURL = "/runs?" + queued.Encode()
	for c := range configs {
		v.Configs = append(v.Configs, c)
	}
	slices.Sort(v.Configs)
	v.Namespaces = namespaceNames(all, nil, v.Namespace, s.opts.DefaultNamespace)
	s.render(w, http.StatusOK, "runs", v)
}

// hideBranches is the runs list's branches filter that leaves branches out.
const hideBranches = "hide"

// queueOf is what a Queued run waits for: its Progressing condition, whose reason is
// QuotaExceeded or AwaitingAdmission and whose message names the quota and the run's place,
// bounded for a page; nil for a run that is not queued.
func queueOf(run *v1alpha1.AgentRun) *metav1.Condition {
	if run.Status.Phase != v1alpha1.PhaseQueued {
		return nil
	}
	c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionProgressing)
	if c == nil {
		return &metav1.Condition{Message: "The run waits for room to start; the operator has not said why yet."}
	}
	bounded := *c
	bounded.Message = textbound.Line(c.Message, maxQueueMessage)
	return &bounded
}

// maxQueueMessage bounds what a page shows of the message of a queued run's condition.
const maxQueueMessage = 300

type runView struct {
	page
	Run     *v1alpha1.AgentRun
	Phase   v1alpha1.RunPhase
	Creator string
	// Branch is what the run is a branch of, when it is one.
	Branch *v1alpha1.RunBranch
	// Timeline is the run's latest Tail steps, with the decisions between them; LeftOut says
	// what comes before them.
	Timeline []runview.Entry
	Tail     int
	LeftOut  runview.LeftOut
	Team     Team
	Gate     *gateView
	Input    *v1alpha1.PendingInput
	Decision *metav1.Condition
	// Agents are who a rejection can send the run back to.
	Agents []string
	// Steps are the steps shown that a retry can start after.
	Steps    []int32
	Duration time.Duration
	// Queue is what the run waits for while it is Queued.
	Queue    *metav1.Condition
	Terminal bool
	// MayPatch says whether the user may reply, cancel and decide at all.
	MayPatch bool
	// Transcript says why the transcript was not read, when it was not.
	Transcript string
	// BranchesAt are the run's branches, each under the timeline's entry (by its place in
	// Timeline) of the step that fanned it out; BranchesUnread says why the branches' own runs
	// were not read, when they were not.
	BranchesAt     map[int][]runview.Branch
	BranchesUnread string
}

// gateView is the gate a run waits at, as the user may act on it.
type gateView struct {
	Name       string
	Since      time.Time
	Expires    time.Time
	ApprovedBy []string
	Required   int32
	// Held is the tool call the gate holds, when it is a tool's gate.
	Held *runview.HeldCall
	// Guard is the text a guardrail's gate holds for review, when it is one's, and GuardedText
	// what that text is.
	Guard       *v1alpha1.PendingGuard
	GuardedText string
	Completes   bool
	// Judge is the output there is to judge: the plan, or the results.
	Judge string
	// MayApprove says whether the user has the approve verb on the run.
	MayApprove bool
	// Blocked says why the user may not approve at this gate, when they may not.
	Blocked string
	// Reaching says how the gate reaches people: its reminders and escalation.
	Reaching []string
}

// runPage shows a run: its summary, the gate it waits at with the decisions the user may make,
// its timeline and its team.
func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	v, status := s.runView(r, r.PathValue("namespace"), r.PathValue("name"))
	s.render(w, status, "run", v)
}

func (s *Server) runView(r *http.Request, namespace, name string) (runView, int) {
	ctx := r.Context()
	v := runView{page: s.page(r, name, "runs"), Tail: runview.DefaultTail}
	status := http.StatusOK
	if raw := r.URL.Query().Get("tail"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			v.Errors = append(v.Errors, "tail: must be a whole number from 0 (0 shows every step)")
			status = http.StatusBadRequest
		} else {
			v.Tail = n
		}
	}
	run := &v1alpha1.AgentRun{}
	if err := s.opts.Kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, run); err != nil {
		v.Errors = append(v.Errors, apiMessage(err))
		return v, statusOf(err)
	}
	v.Live = runEvents(run)
	v.Run, v.Phase, v.Terminal = run, runview.Phase(run), run.Status.Phase.Terminal()
	v.Creator, v.Branch = s.creatorOf(ctx, run), runview.BranchOf(run)
	tr := s.transcriptOf(r, run, 0)
	v.Transcript = tr.Unread
	cfg := s.config(ctx, run)
	// The team counts every handoff the run took; the timeline shows the latest steps.
	v.Team = team(cfg, run, tr.Timeline)
	v.Timeline, v.LeftOut = runview.Latest(runview.WithoutWorking(run, tr.Timeline), v.Tail)
	if runview.HasBranches(run) {
		tree, err := runview.ReadBranches(ctx, s.opts.Kube, run)
		if err != nil {
			v.BranchesUnread = apiMessage(err)
		}
		v.BranchesAt = runview.AttachBranches(v.Timeline, tree)
	}
	v.Decision = meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionDecision)
	v.Queue = queueOf(run)
	v.Input = run.Status.PendingInput
	v.MayPatch = s.access.allowed(ctx, namespace, "patch", "agentruns")
	if p := run.Status.PendingApproval; p != nil && run.Status.Phase == v1alpha1.PhaseAwaitingApproval {
		v.Gate = s.gateView(r, run, cfg, tr, v.Creator)
	}
	if cfg != nil {
		for _, a := range cfg.Spec.Agents {
			v.Agents = append(v.Agents, a.Name)
		}
	}
	for _, e := range v.Timeline {
		if e.Kind == runview.EntryStep && e.Recorded && !slices.Contains(v.Steps, e.Step) {
			v.Steps = append(v.Steps, e.Step)
		}
	}
	if st := run.Status.StartTime; st != nil {
		end := time.Now()
		if ct := run.Status.CompletionTime; ct != nil {
			end = ct.Time
		}
		v.Duration = max(end.Sub(st.Time), 0).Round(time.Second)
	}
	return v, status
}

// gateView is the run's pending gate, with what the user may do at it. tr is the run's
// transcript, at least the step before the gate or the held tool call's; creator is who created
// the run, or the run it is a branch of.
func (s *Server) gateView(r *http.Request, run *v1alpha1.AgentRun, cfg *v1alpha1.AgentConfig, tr runview.Transcript, creator string) *gateView {
	p := run.Status.PendingApproval
	g := &gateView{Name: p.Gate, Since: p.Since.Time, ApprovedBy: p.ApprovedBy, Required: 1,
		Completes: p.Completes != nil, Judge: judge(tr, run),
		MayApprove: s.access.allowed(r.Context(), run.Namespace, v1alpha1.ApproveVerb, "agentruns")}
	switch {
	case p.Guard != nil:
		g.Guard, g.GuardedText = p.Guard, runview.GuardedText(*p.Guard)
	case p.ToolCall != nil:
		// The call's whole arguments, from its record; status's copy with a note without it.
		h := runview.Held(p.ToolCall, tr.Held, tr.Unread)
		g.Held = &h
	}
	if p.Expires != nil {
		g.Expires = p.Expires.Time
	}
	if spec := runview.GateSpec(cfg, run.Status.CurrentAgent, p.Gate); spec != nil {
		g.Required = max(spec.Required, 1)
		g.Reaching = runview.Reaching(spec, p.Since.Time, time.Now())
		if spec.AllowSelfApproval != nil && !*spec.AllowSelfApproval {
			g.Blocked = selfApproval(run, p.Gate, creator, s.opts.User)
		}
	}
	if slices.Contains(p.ApprovedBy, s.opts.User) {
		g.Blocked = "You approved gate " + p.Gate + " already; approvals must come from different people."
	}
	return g
}

// selfApproval says why user may not approve at a gate that needs an approver other than the
// run's creator, when they may not. A branch's creator is the creator of the run it is a branch
// of.
func selfApproval(run *v1alpha1.AgentRun, gate, creator, user string) string {
	branch := run.Spec.Branch != nil
	switch {
	case creator == "" && branch:
		return "The creator of the run this branch is part of was not recorded, so gate " + gate + ", which needs an approver other than that run's creator, cannot be approved. Reject it or let it time out."
	case creator == "":
		return "This run's creator was not recorded, so gate " + gate + ", which needs an approver other than the run's creator, cannot be approved. Reject it or let it time out."
	case creator == user && branch:
		return "You created the run this branch is part of, and gate " + gate + " needs an approver other than that run's creator (allowSelfApproval: false)."
	case creator == user:
		return "You created this run, and gate " + gate + " needs an approver other than the run's creator (allowSelfApproval: false)."
	}
	return ""
}

// creatorOf is who created the run, as the admission webhook recorded it; for a branch, who
// created the run whose branch it is, which the operator holds its gates to.
func (s *Server) creatorOf(ctx context.Context, run *v1alpha1.AgentRun) string {
	return creatorOfRoot(run, func(name string) *v1alpha1.AgentRun {
		parent := &v1alpha1.AgentRun{}
		if err := s.opts.Kube.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: name}, parent); err != nil {
			return nil
		}
		return parent
	})
}

// records reads one step's records; when it cannot, it says why.
func (s *Server) records(r *http.Request, run *v1alpha1.AgentRun, step int32) ([]records.Record, string) {
	if s.opts.Transcripts == nil {
		return nil, s.unreached()
	}
	page, err := s.opts.Transcripts.Records(r.Context(), run.Namespace, run.Name, step)
	if err != nil {
		return nil, err.Error()
	}
	if page.UID != "" && page.UID != string(run.UID) {
		return nil, runview.ErrEarlierRun.Error()
	}
	return page.Records, ""
}

type stepView struct {
	page
	Run        *v1alpha1.AgentRun
	Step       int32
	Body       *records.StepBody
	Time       time.Time
	Tools      []toolView
	Running    bool
	Transcript string
}

type toolView struct {
	Kind    string
	Time    time.Time
	Body    records.Tool
	Latency time.Duration
}

// stepPage shows one step's transcript in full: what the agent was given, the messages, its
// answer and the tool calls it made. While the step runs, it fills in as records arrive.
func (s *Server) stepPage(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	step, err := strconv.ParseInt(r.PathValue("step"), 10, 32)
	v := stepView{page: s.page(r, name+": step "+r.PathValue("step"), "runs")}
	if err != nil || step < 1 {
		v.Errors = append(v.Errors, "step: must be a whole number from 1")
		s.render(w, http.StatusBadRequest, "step", v)
		return
	}
	v.Step = int32(step)
	run := &v1alpha1.AgentRun{}
	if err := s.opts.Kube.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, run); err != nil {
		v.Errors = append(v.Errors, apiMessage(err))
		s.render(w, statusOf(err), "step", v)
		return
	}
	v.Live = runEvents(run)
	v.Run = run
	recs, note := s.records(r, run, v.Step)
	v.Transcript = note
	for _, rec := range recs {
		switch {
		case rec.Kind == "step":
			b := rec.StepBody()
			v.Body, v.Time = &b, rec.Time
		case rec.IsTool():
			b := rec.ToolBody()
			v.Tools = append(v.Tools, toolView{Kind: string(rec.Kind), Time: rec.Time, Body: b, Latency: time.Duration(b.LatencyMs) * time.Millisecond})
		}
	}
	v.Running = v.Body == nil && run.Status.Phase == v1alpha1.PhaseRunning && run.Status.StepCount+1 == v.Step
	s.render(w, http.StatusOK, "step", v)
}

// runEvents is the address of the events that change a run's pages, from the version of the
// run the page is drawn from: a change made while the page loads is not missed.
func runEvents(run *v1alpha1.AgentRun) string {
	return "/live?" + url.Values{"watch": {"run"}, "namespace": {run.Namespace}, "name": {run.Name}, "rv": {run.ResourceVersion}}.Encode()
}

// statusOf is the HTTP status for an API server's error: its own, else 502.
func statusOf(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		return int(st.Status().Code)
	}
	return http.StatusBadGateway
}
