package guardrails

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/textbound"
)

// DefaultTimeout bounds a check whose guardrail names no timeout.
const DefaultTimeout = 5 * time.Second

// maxAnswerBytes bounds what is read of a guardrail's answer: a redaction's text and a little.
const maxAnswerBytes = MaxTextBytes + 16<<10

// Client asks guardrails. Its HTTP client goes through the egress policy and retries as tool
// calls do; Headers reads a guardrail's headersFrom Secret.
type Client struct {
	HTTP    *http.Client
	Headers func(ctx context.Context, namespace, name string) (map[string]string, error)
}

// Screen asks the guardrails of stage about req's text, in order: a redaction is what the next
// one is asked about, a block stops there, and so does a gate nobody decided at yet. review says
// what people decided at the guardrails' gates about this text: a guardrail they decided at is
// not asked again, and their decision stands for its answer.
func (c *Client) Screen(ctx context.Context, all []v1alpha1.Guardrail, req Request, review Review) Screened {
	s := Screened{Text: req.Text}
	for _, g := range At(all, req.Stage) {
		req.Text = s.Text
		v, decided := Reviewed(Verdict{Guardrail: g.Name, Stage: req.Stage, Action: Gate}, review)
		var redacted string
		if !decided {
			started := time.Now()
			a, err := c.ask(ctx, g, req)
			v, redacted = Decide(g, req.Stage, a, err)
			v.LatencyMs = time.Since(started).Milliseconds()
			metrics.GuardrailChecks.WithLabelValues(req.Namespace, req.Config, g.Name, string(req.Stage), v.Action).Inc()
			metrics.GuardrailLatency.WithLabelValues(req.Namespace, g.Name, string(req.Stage)).Observe(time.Since(started).Seconds())
		}
		s.Verdicts = append(s.Verdicts, v)
		switch v.Action {
		case Redact:
			s.Text = redacted
		case Block:
			s.Blocked = &s.Verdicts[len(s.Verdicts)-1]
			return s
		case Gate:
			s.Gated = &s.Verdicts[len(s.Verdicts)-1]
			return s
		}
	}
	return s
}

// ask sends one check and reads the answer.
func (c *Client) ask(ctx context.Context, g v1alpha1.Guardrail, req Request) (Answer, error) {
	if c == nil || c.HTTP == nil {
		return Answer{}, errors.New("this operator calls no guardrails")
	}
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(g))
	defer cancel()
	req.Text = textbound.Bytes(req.Text, MaxTextBytes)
	body, err := json.Marshal(req)
	if err != nil {
		return Answer{}, err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	if ref := g.HeadersFrom; ref != nil {
		headers, err := c.Headers(ctx, req.Namespace, ref.Name)
		if err != nil {
			return Answer{}, fmt.Errorf("reading its headers: %w", err)
		}
		for k, v := range headers {
			r.Header.Set(k, v)
		}
	}
	res, err := c.HTTP.Do(r)
	if err != nil {
		return Answer{}, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode/100 != 2 {
		return Answer{}, fmt.Errorf("HTTP %s", res.Status)
	}
	var a Answer
	if err := json.NewDecoder(io.LimitReader(res.Body, maxAnswerBytes)).Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("its answer is not the JSON a guardrail answers: %w", err)
	}
	return a, nil
}

func timeoutOf(g v1alpha1.Guardrail) time.Duration {
	if t := g.Timeout.OrZero(); t > 0 {
		return t
	}
	return DefaultTimeout
}
