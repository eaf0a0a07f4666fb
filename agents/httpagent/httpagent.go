// Package httpagent is the HTTP provider: a step is a POST to an agent served over HTTP.
package httpagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// httpAgent runs a step by POSTing it to an agent served over HTTP, written in any framework.
// The request and response are documented in docs/providers.md. Every request of one step
// carries the same Idempotency-Key, retries and re-runs after an operator restart included;
// every other step has another.
type httpAgent struct {
	deps agents.Dependencies
}

// New is the HTTP provider.
func New(deps agents.Dependencies) agents.Agent { return &httpAgent{deps: deps} }

// HTTPStepRequest is the body Baton posts to an HTTP agent.
type HTTPStepRequest struct {
	Run          HTTPRun                 `json:"run"`
	Step         int32                   `json:"step"`
	Attempt      int                     `json:"attempt"`
	Agent        HTTPAgentInfo           `json:"agent"`
	Task         string                  `json:"task"`
	Input        string                  `json:"input"`
	Reason       string                  `json:"reason,omitempty"`
	Context      []workflow.ContextEntry `json:"context,omitempty"`
	Handoffs     []agents.Peer           `json:"handoffs,omitempty"`
	Children     []agents.Peer           `json:"children,omitempty"`
	Signals      []v1alpha1.Signal       `json:"signals,omitempty"`
	Continuation string                  `json:"continuation,omitempty"`
	Repair       *agents.Repair          `json:"repair,omitempty"`
	OutputSchema json.RawMessage         `json:"outputSchema,omitempty"`
	LimitsLeft   workflow.Left           `json:"limitsLeft"`
	// WrapUp, when set, says which limit ran out: the step is the run's last turn.
	WrapUp string `json:"wrapUp,omitempty"`
	// MaxBranches, when set, is the most branches the answer's parallel may list: the agent has
	// parallel, and the step may fan out.
	MaxBranches int32 `json:"maxBranches,omitempty"`
}

// HTTPRun names the run a step belongs to.
type HTTPRun struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// HTTPAgentInfo is the agent's part of its config.
type HTTPAgentInfo struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	Instructions string `json:"instructions,omitempty"`
}

// HTTPStepResponse is what an HTTP agent answers.
type HTTPStepResponse struct {
	Output       string                    `json:"output"`
	Handoff      string                    `json:"handoff,omitempty"`
	Reason       string                    `json:"reason,omitempty"`
	Signal       string                    `json:"signal,omitempty"`
	Tokens       int64                     `json:"tokens,omitempty"`
	InputTokens  int64                     `json:"inputTokens,omitempty"`
	FinishReason v1alpha1.FinishReason     `json:"finishReason,omitempty"`
	Routing      *v1alpha1.RoutingDecision `json:"routing,omitempty"`
	// Parallel fans out: the branches, each one of the agent's handoffs and its input.
	Parallel []workflow.Branch `json:"parallel,omitempty"`
}

// IdempotencyKey is the key of a run's step.
func IdempotencyKey(runUID string, step int32) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", runUID, step)))
	return hex.EncodeToString(sum[:16])
}

// maxResponseBody bounds what Baton reads of an HTTP agent's answer.
const maxResponseBody = 1 << 20

func (h *httpAgent) Step(ctx context.Context, req *agents.Request) (*workflow.Result, error) {
	body := HTTPStepRequest{
		Run:     HTTPRun{Namespace: req.Namespace, Name: req.Run, UID: req.RunUID},
		Step:    req.Step,
		Attempt: req.Attempt,
		Agent:   HTTPAgentInfo{Name: req.Agent.Name, Description: req.Agent.Description, Instructions: req.Agent.Instructions},
		Task:    req.Task, Input: req.Input, Reason: req.Reason, Context: req.Context,
		Handoffs: req.Peers, Children: req.Children, Signals: req.Signals,
		Continuation: req.Continuation, Repair: req.Repair, LimitsLeft: req.Left, WrapUp: req.WrapUp,
		MaxBranches: req.MaxBranches(),
	}
	if req.Agent.OutputSchema != nil {
		body.OutputSchema = req.Agent.OutputSchema.Raw
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.Agent.Model.Endpoint, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the HTTP agent's endpoint: %w", err)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Idempotency-Key", IdempotencyKey(req.RunUID, req.Step))
	key := ""
	if ref := req.Agent.Model.APIKeySecretRef; ref != nil {
		if h.deps.Secrets == nil {
			return nil, errors.New("no Secret reader is configured")
		}
		if key, err = h.deps.Secrets.SecretKey(ctx, req.KeyNamespace(), ref.Name, ref.Key); err != nil {
			return nil, err
		}
		httpReq.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := h.deps.HTTPClient.Do(httpReq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("calling the HTTP agent: %s", agents.Scrub(err.Error(), key))
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("reading the HTTP agent's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("the HTTP agent answered %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode),
			agents.Scrub(strings.TrimSpace(string(raw)), key))
	}
	var out HTTPStepResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("the HTTP agent's answer is not the documented JSON: %w", err)
	}
	if out.FinishReason == "" {
		out.FinishReason = v1alpha1.FinishStop
	}
	return &workflow.Result{Output: out.Output, Handoff: out.Handoff, Reason: out.Reason, Signal: out.Signal,
		Tokens: out.Tokens, InputTokens: out.InputTokens, FinishReason: out.FinishReason, Routing: out.Routing, Parallel: out.Parallel}, nil
}
