package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// Bounds of what a provider's answer may carry into the core. The core bounds what it keeps in
// status further; these keep a broken or hostile server from handing it megabytes or values
// the API would refuse.
const (
	// maxAnswerBytes bounds a step's output, in bytes as the transcript stores it (StoredLen).
	maxAnswerBytes = 1 << 20
	// maxNameBytes bounds the names an answer gives: handoff, signal, routing targets.
	maxNameBytes = 253
	// maxReasonBytes bounds the reasons an answer gives.
	maxReasonBytes = 4096
	// maxIgnored bounds the ignored tool calls an answer reports.
	maxIgnored = 16
	// maxStepTokens is the most tokens one step may report; more is taken as this many.
	maxStepTokens = 1 << 40
	// maxBodyBytes bounds what Baton reads of any answer of a model server or HTTP agent.
	maxBodyBytes = 8 << 20
	// minSecretLen is the shortest key that is redacted: shorter ones are too likely to be
	// ordinary words ("none" for servers that need no key).
	minSecretLen = 6
)

// ErrInvalidAnswer marks a step that failed because the agent's answer broke the protocol.
var ErrInvalidAnswer = errors.New("invalid answer")

// checked is the boundary between a provider and the core: every answer is checked and cleaned
// here, whatever the provider, before the core sees it. Token counts are never negative, a
// routing confidence outside [0, 1] or a fan-out of more than MaxBranchesPerFanOut branches fails
// the step, strings (branches' agents and inputs too) are valid UTF-8 and bounded in bytes, and
// the agent's API key is redacted from everything, errors included.
type checked struct {
	next    Agent
	secrets SecretReader
}

func (c *checked) Step(ctx context.Context, req *Request) (*workflow.Result, error) {
	if req.Updates != nil {
		// What a remote agent reports is kept in the transcript: never its key.
		r := *req
		r.Updates = redactedUpdates{next: req.Updates, keys: c.keysOf(ctx, req)}
		req = &r
	}
	res, err := c.next.Step(ctx, req)
	if res == nil {
		res = &workflow.Result{}
	}
	return res, c.check(ctx, req, res, err)
}

// check is what Step does with the provider's answer, in place, apart from Step so that the
// frame a waiting step keeps on its stack holds none of it.
func (c *checked) check(ctx context.Context, req *Request, res *workflow.Result, err error) error {
	keys := c.keysOf(ctx, req)
	if err != nil {
		// A step that failed after some of its requests still used their tokens, and made its
		// tool calls.
		*res = usageOf(*res)
		return redactError(err, keys)
	}
	clean, err := checkAnswer(*res, keys)
	if err != nil {
		// An answer that cannot be used still used its tokens and made its tool calls.
		*res = usageOf(*res)
		return err
	}
	*res = clean
	return nil
}

// usageOf is what a step that failed used: its tokens and tool calls, bounded, and nothing else.
func usageOf(res workflow.Result) workflow.Result {
	used := boundUsage(res)
	return workflow.Result{Tokens: used.Tokens, CountedTokens: used.CountedTokens, InputTokens: used.InputTokens, CountedInputTokens: used.CountedInputTokens,
		ToolCalls: used.ToolCalls, CountedToolCalls: used.CountedToolCalls}
}

// boundUsage keeps a step's reported usage sane: tokens within [0, maxStepTokens], and each part
// (counted, input, counted input) within the whole it is part of.
func boundUsage(res workflow.Result) workflow.Result {
	res.Tokens = min(max(res.Tokens, 0), maxStepTokens)
	res.CountedTokens = min(max(res.CountedTokens, 0), res.Tokens)
	res.InputTokens = min(max(res.InputTokens, 0), res.Tokens)
	res.CountedInputTokens = min(max(res.CountedInputTokens, 0), res.InputTokens, res.CountedTokens)
	return res
}

// keysOf is the agent's API key, when it has one: the value to redact.
func (c *checked) keysOf(ctx context.Context, req *Request) []string {
	ref := req.Agent.Model.APIKeySecretRef
	if ref == nil || c.secrets == nil || req.Agent.Model.Provider == v1alpha1.ProviderScripted {
		return nil
	}
	key, err := c.secrets.SecretKey(ctx, req.KeyNamespace(), ref.Name, ref.Key)
	if err != nil || len(key) < minSecretLen {
		return nil
	}
	return []string{key}
}

// checkAnswer cleans a provider's answer, or says why it cannot be used.
func checkAnswer(res workflow.Result, keys []string) (workflow.Result, error) {
	clean := func(s string, n int) string {
		return textbound.Bytes(redact(strings.ToValidUTF8(s, "\uFFFD"), keys), n)
	}
	res.Output = textbound.Stored(redact(strings.ToValidUTF8(res.Output, "\uFFFD"), keys), maxAnswerBytes)
	res.Handoff = clean(res.Handoff, maxNameBytes)
	res.Reason = clean(res.Reason, maxReasonBytes)
	res.Signal = clean(res.Signal, maxNameBytes)
	res.RemoteTask = clean(res.RemoteTask, maxNameBytes)
	if len(res.Ignored) > maxIgnored {
		res.Ignored = res.Ignored[:maxIgnored]
	}
	for i := range res.Ignored {
		res.Ignored[i] = clean(res.Ignored[i], 64)
	}
	res = boundUsage(res)
	if res.FinishReason != v1alpha1.FinishLength {
		res.FinishReason = v1alpha1.FinishStop
	}
	if len(res.Parallel) > v1alpha1.MaxBranchesPerFanOut {
		return workflow.Result{}, fmt.Errorf("%w: the answer asks for %d branches, and a fan-out has at most %d", ErrInvalidAnswer, len(res.Parallel), v1alpha1.MaxBranchesPerFanOut)
	}
	for i := range res.Parallel {
		b := &res.Parallel[i]
		b.Agent, b.Input = clean(b.Agent, maxNameBytes), clean(b.Input, maxAnswerBytes)
	}
	if r := res.Routing; r != nil {
		r.Target = clean(r.Target, maxNameBytes)
		r.Fallback = clean(r.Fallback, maxNameBytes)
		r.Reason = clean(r.Reason, maxReasonBytes)
		if c := r.Confidence; c != nil && (math.IsNaN(*c) || *c < 0 || *c > 1) {
			return workflow.Result{}, fmt.Errorf("%w: routing confidence %g is outside [0, 1]", ErrInvalidAnswer, *c)
		}
	}
	return res, nil
}

// Scrub removes a secret from a message a server sent, and bounds it to 300 characters: what a
// provider quotes of an error answer.
func Scrub(msg, secret string) string {
	if len(secret) >= 4 {
		msg = redact(msg, []string{secret})
	}
	if r := []rune(msg); len(r) > 300 {
		msg = string(r[:300]) + "…"
	}
	return msg
}

// redact replaces every key in s.
func redact(s string, keys []string) string {
	for _, k := range keys {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

// redactedUpdates passes on what a remote agent reports without its key.
type redactedUpdates struct {
	next Updates
	keys []string
}

func (u redactedUpdates) Report(ctx context.Context, state, text string) {
	u.next.Report(ctx, redact(strings.ToValidUTF8(state, "\uFFFD"), u.keys), redact(strings.ToValidUTF8(text, "\uFFFD"), u.keys))
}

// redactedError is an error whose message had keys removed; errors.Is still sees the cause.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

func redactError(err error, keys []string) error {
	// Redacted whole, then cut: a key across the cut would otherwise keep its start.
	msg := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if clean := textbound.Bytes(redact(msg, keys), maxReasonBytes); clean != err.Error() {
		return &redactedError{msg: clean, cause: err}
	}
	return err
}

// limitBodies makes every answer body fail once it passes maxBodyBytes, so that a server
// cannot make the operator hold an answer of any size.
type limitBodies struct{ next http.RoundTripper }

func (l limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxBodyBytes}
	}
	return resp, err
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%w: the answer is larger than %d MiB", ErrInvalidAnswer, maxBodyBytes>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
