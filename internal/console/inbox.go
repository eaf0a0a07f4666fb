package console

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
)

// inboxItem is a gate or a question waiting for the user.
type inboxItem struct {
	Run    *v1alpha1.AgentRun
	Gate   *gateView
	Input  *v1alpha1.PendingInput
	Agents []string
	// Creator is who created the run, or the run it is a branch of.
	Creator string
	// Branch is what the run is a branch of, when it is one.
	Branch *v1alpha1.RunBranch
	// Transcript says why the output to judge comes from status, when the transcript was not
	// read.
	Transcript string
}

func (i inboxItem) since() time.Time {
	if i.Gate != nil {
		return i.Gate.Since
	}
	return i.Input.Since.Time
}

type inboxView struct {
	page
	Items []inboxItem
}

// inboxPage lists every gate waiting for the user, across the namespaces the console looks in:
// those they may approve and have not approved yet (a gate that needs someone other than the
// run's creator is not the creator's), and runs waiting for an answer they may give, each with
// the plan or output to judge and the forms to decide. A branch's gates are its own, and its
// item names the run it is a branch of.
func (s *Server) inboxPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := inboxView{page: s.page(r, "Inbox", "inbox")}
	runs, version, errs := s.listRuns(ctx, "")
	v.Live = "/live?" + url.Values{"watch": {"runs"}, "rv": {version}}.Encode()
	for _, err := range errs {
		v.Errors = append(v.Errors, apiMessage(err))
	}
	// Many runs wait at the gates of one config: it is read once.
	configs := configMemo{}
	listed := make(map[types.NamespacedName]*v1alpha1.AgentRun, len(runs))
	for i := range runs {
		listed[types.NamespacedName{Namespace: runs[i].Namespace, Name: runs[i].Name}] = &runs[i]
	}
	for i := range runs {
		run := &runs[i]
		// A branch's parent is in the same namespace, so among the runs listed.
		creator := creatorOfRoot(run, func(name string) *v1alpha1.AgentRun {
			return listed[types.NamespacedName{Namespace: run.Namespace, Name: name}]
		})
		switch run.Status.Phase {
		case v1alpha1.PhaseAwaitingApproval:
			if run.Status.PendingApproval == nil || !s.access.allowed(ctx, run.Namespace, v1alpha1.ApproveVerb, "agentruns") {
				continue
			}
			// Only the last step's records: its output is what there is to judge; or, at a
			// tool's gate, the records of the step that asked for the call, which has it whole.
			step := run.Status.StepCount
			if tc := run.Status.PendingApproval.ToolCall; tc != nil {
				step = tc.Step
			}
			tr := s.transcriptOf(r, run, step)
			cfg := configs.get(ctx, s, run)
			g := s.gateView(r, run, cfg, tr, creator)
			if g.Blocked != "" {
				continue
			}
			item := inboxItem{Run: run, Gate: g, Creator: creator, Branch: runview.BranchOf(run), Transcript: tr.Unread}
			if cfg != nil {
				for _, a := range cfg.Spec.Agents {
					item.Agents = append(item.Agents, a.Name)
				}
			}
			v.Items = append(v.Items, item)
		case v1alpha1.PhaseAwaitingInput:
			if run.Status.PendingInput == nil || !s.access.allowed(ctx, run.Namespace, "patch", "agentruns") {
				continue
			}
			v.Items = append(v.Items, inboxItem{Run: run, Input: run.Status.PendingInput, Creator: creator, Branch: runview.BranchOf(run)})
		}
	}
	// Oldest first: the gate that has waited longest is the first to judge.
	sort.SliceStable(v.Items, func(i, j int) bool { return v.Items[i].since().Before(v.Items[j].since()) })
	s.render(w, http.StatusOK, "inbox", v)
}

// configMemo keeps the AgentConfigs one page has read, by namespace and name (nil: unreadable).
type configMemo map[types.NamespacedName]*v1alpha1.AgentConfig

func (m configMemo) get(ctx context.Context, s *Server, run *v1alpha1.AgentRun) *v1alpha1.AgentConfig {
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.ConfigRef.Name}
	cfg, ok := m[key]
	if !ok {
		cfg = s.config(ctx, run)
		m[key] = cfg
	}
	return cfg
}

type configOption struct {
	Namespace, Name, Mode string
	Agents                int
}

type newView struct {
	page
	Configs                []configOption
	Namespaces             []string
	Namespace, Config      string
	Input, Name, Approvals string
}

// newPage is the form that starts a run of a config with an input.
func (s *Server) newPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := newView{page: s.page(r, "New run", "new"), Namespace: q.Get("namespace"), Config: q.Get("config")}
	s.renderNew(w, r, http.StatusOK, v)
}

func (s *Server) renderNew(w http.ResponseWriter, r *http.Request, status int, v newView) {
	configs, errs := s.listConfigs(r.Context(), "")
	for _, err := range errs {
		v.Errors = append(v.Errors, apiMessage(err))
	}
	for _, c := range configs {
		mode := string(c.Spec.Mode)
		if mode == "" {
			mode = "Swarm"
		}
		v.Configs = append(v.Configs, configOption{Namespace: c.Namespace, Name: c.Name, Mode: mode, Agents: len(c.Spec.Agents)})
	}
	v.Namespaces = namespaceNames(nil, configs, s.opts.DefaultNamespace)
	if v.Namespace == "" {
		v.Namespace = s.opts.DefaultNamespace
	}
	s.render(w, status, "new", v)
}
