package toolbox

import (
	"context"
	"errors"
	"math"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// Maker makes the toolboxes of steps. Between a run's steps it keeps the run's tool call
// counts for the repeated-call detector, so that each step need not count them again from the
// transcript.
type Maker struct {
	// Clients hands out the tool servers' clients; without it, steps of agents with tools fail.
	Clients Clients
	// Headers reads a Secret's keys: a tool server's headers.
	Headers func(ctx context.Context, namespace, name string) (map[string]string, error)
	Store   transcript.Store
	// Content puts tool arguments and results on the calls' spans.
	Content bool
	// Guardrails asks the configs' guardrails about tool results.
	Guardrails *guardrails.Client

	mu   sync.Mutex
	runs map[types.NamespacedName]counted
}

// counted is a run's tool calls counted before one of its steps.
type counted struct {
	uid    types.UID
	before int32
	uses   *workflow.ToolUses
}

// New makes the toolbox of a step of an agent with tools, from the run's status when the step
// started and what the transcript holds of the run's calls.
func (m *Maker) New(ctx context.Context, plan *workflow.Plan, id records.RunID, config string, step workflow.Step, from *v1alpha1.AgentRunStatus) (*Box, error) {
	if m.Clients == nil {
		return nil, errors.New("this operator was started without tool clients")
	}
	uses := m.counted(id, step.Number)
	if uses == nil {
		// A turn of a session counts the calls of its earlier turns given the same history.
		uses = &workflow.ToolUses{}
		for _, uid := range plan.EarlierTurns() {
			if err := addToolUses(ctx, m.Store, uid, math.MaxInt32, uses); err != nil {
				return nil, err
			}
		}
		if err := addToolUses(ctx, m.Store, id.UID, step.Number, uses); err != nil {
			return nil, err
		}
	}
	b := &Box{
		plan:        plan,
		run:         id,
		config:      config,
		content:     m.Content,
		step:        step.Number,
		agent:       step.Agent,
		clients:     m.Clients,
		headers:     m.Headers,
		store:       m.Store,
		log:         ctrl.Log.WithName("tools").WithValues("agentRun", klog.KRef(id.Namespace, id.Name), "step", step.Number),
		statusCalls: from.ToolCalls,
		approvals:   from.Approvals,
		uses:        uses,
		taint:       from.Taint.DeepCopy(),
		guardrails:  m.Guardrails,
	}
	if err := b.load(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Done keeps the run's counts, this step's calls included, for its next step; a step that
// failed may still be calling, so the next step counts from the transcript instead.
func (m *Maker) Done(b *Box, failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs = map[types.NamespacedName]counted{}
	}
	c := counted{uid: types.UID(b.run.UID), before: b.step + 1}
	if !failed {
		c.uses = b.uses
	}
	m.runs[b.run.Key()] = c
}

// counted is a copy of the run's counts before the step, if kept.
func (m *Maker) counted(id records.RunID, step int32) *workflow.ToolUses {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.runs[id.Key()]
	if !ok || c.uid != types.UID(id.UID) || c.before != step || c.uses == nil {
		return nil
	}
	return c.uses.Clone()
}

// Forget drops what is kept of a run that ended or is gone.
func (m *Maker) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, key)
}
