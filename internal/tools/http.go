package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/textbound"
)

// Bounds of an HTTP tool's answer.
const (
	// maxBodyBytes is the most of an answer Baton reads; a larger one fails the call.
	maxBodyBytes = 8 << 20
	// maxErrorBodyBytes is how much of a non-2xx answer's body the model is given.
	maxErrorBodyBytes = 4096
)

// httpClient is one tool served over HTTP: each call POSTs the arguments as JSON.
type httpClient struct {
	tool    Tool
	url     string
	version string
	http    *http.Client
	timeout time.Duration
	output  *outputSchema
	redact  redactor
}

func newHTTPClient(opts Options, server v1alpha1.ToolServer, headers map[string]string) (*httpClient, error) {
	spec := server.HTTP
	name := spec.Tool
	if name == "" {
		name = server.Name
	}
	input := json.RawMessage(`{"type":"object"}`)
	if spec.InputSchema != nil && len(spec.InputSchema.Raw) > 0 {
		input = append(json.RawMessage(nil), spec.InputSchema.Raw...)
	}
	c := &httpClient{
		tool:    Tool{Server: server.Name, Name: name, Description: spec.Description, InputSchema: input},
		url:     spec.URL,
		version: opts.Version,
		timeout: callTimeout(spec.Timeout),
		redact:  newRedactor(headers),
	}
	if spec.OutputSchema != nil && len(spec.OutputSchema.Raw) > 0 {
		sch, err := compileOutputSchema(server.Name, name, spec.OutputSchema.Raw)
		if err != nil {
			return nil, fmt.Errorf("tool server %s: http.outputSchema: %w", server.Name, err)
		}
		c.output = sch
	}
	c.http = clientWith(opts.HTTPClient, func(next http.RoundTripper) http.RoundTripper {
		return newWithHeaders(next, spec.URL, headers)
	})
	return c, nil
}

// Tools is the one tool.
func (c *httpClient) Tools(context.Context) ([]Tool, error) {
	return []Tool{c.tool}, nil
}

// Call POSTs the arguments, with the call's idempotency key in the Idempotency-Key header.
func (c *httpClient) Call(ctx context.Context, call Call) (Result, error) {
	if call.Tool != c.tool.Name {
		return Result{}, fmt.Errorf("tool server %s serves the tool %s, not %s", c.tool.Server, c.tool.Name, call.Tool)
	}
	args, err := objectArguments(call.Arguments)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(args))
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "baton/"+orDev(c.version))
	if call.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", call.IdempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Result{}, c.redact.err(fmt.Errorf("calling tool %s: %w", c.tool.Name, err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := readBounded(resp.Body)
	if err != nil {
		return Result{}, c.redact.err(fmt.Errorf("reading the answer of tool %s: %w", c.tool.Name, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		text := strings.ToValidUTF8(strings.TrimSpace(string(body)), "\uFFFD")
		return Result{IsError: true, Content: textbound.StoredNoted(c.redact.text(fmt.Sprintf("HTTP %d %s: %s",
			resp.StatusCode, http.StatusText(resp.StatusCode), textbound.StoredNoted(text, maxErrorBodyBytes))), MaxResultBytes)}, nil
	}
	return c.answer(resp.Header.Get("Content-Type"), body), nil
}

// answer is the result of a 2xx answer: JSON is the structured result (checked against the
// output schema), anything else is text.
func (c *httpClient) answer(contentType string, body []byte) Result {
	doc := bytes.TrimSpace(body)
	if isJSON(contentType, doc) {
		if c.output != nil {
			if problems, ok := c.output.check(doc); !ok {
				return Result{IsError: true, Content: textbound.StoredNoted("the tool's result does not match its output schema: "+c.redact.text(problems), MaxResultBytes)}
			}
		}
		return structuredResult(c.redact.json(doc), false)
	}
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	if c.output != nil {
		return Result{IsError: true, Content: textbound.StoredNoted("the tool declares an output schema but its answer is not JSON: "+c.redact.text(text), MaxResultBytes)}
	}
	return Result{Content: textbound.StoredNoted(c.redact.text(text), MaxResultBytes)}
}

// isJSON reports whether an answer is a JSON document: one that parses, and is declared as JSON
// or not declared at all.
func isJSON(contentType string, doc []byte) bool {
	if len(doc) == 0 || !json.Valid(doc) {
		return false
	}
	if contentType == "" {
		return true
	}
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && (media == "application/json" || strings.HasSuffix(media, "+json"))
}

// errTooLarge is the error of an answer larger than maxBodyBytes.
var errTooLarge = fmt.Errorf("the answer is larger than %d MiB", maxBodyBytes>>20)

// readBounded reads a body of at most maxBodyBytes.
func readBounded(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxBodyBytes {
		return nil, errTooLarge
	}
	return body, nil
}

func (c *httpClient) close() {}

func orDev(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}
