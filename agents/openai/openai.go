// Package openai is the OpenAI provider: steps on any OpenAI-compatible chat completions server,
// through the official SDK.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// openAI runs steps on an OpenAI-compatible chat completions endpoint (OpenAI, Azure OpenAI's
// compatible endpoint, vLLM, Ollama, LiteLLM, llama.cpp's server) through the official SDK.
// Handoffs are offered as transfer_to_<agent> tools, an agent's fan-out to several of them (when
// it has parallel) as a fan_out tool, declared signals as an emit_signal tool, and a
// supervisor's routing as a route tool. The SDK's own retries are off: RetryTransport
// retries, with the policy the docs state.
type openAI struct {
	deps agents.Dependencies
}

// New is the OpenAI provider.
func New(deps agents.Dependencies) agents.Agent { return &openAI{deps: deps} }

// Tool names offered to models. A handoff target is transfer_to_<agent> (dashes become
// underscores, as tool names allow).
const (
	toolTransferPrefix = "transfer_to_"
	toolSignal         = "emit_signal"
	toolRoute          = "route"
)

// toolName is the transfer tool for a handoff target.
func toolName(agent string) string {
	return toolTransferPrefix + strings.ReplaceAll(agent, "-", "_")
}

// lastRequest asks a model that made all the tool calls its step allows for its answer.
const lastRequest = "You have made all the tool calls this step allows. Answer now with what you have: hand off, emit a signal or give your answer, without calling tools."

// maxContinuationTokens caps the larger token limit a continuation asks for.
const maxContinuationTokens = 32768

func (o *openAI) Step(ctx context.Context, req *agents.Request) (*workflow.Result, error) {
	m := req.Agent.Model
	key, err := o.apiKey(ctx, req)
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(o.deps.HTTPClient),
		option.WithMaxRetries(0),
		option.WithAPIKey(key),
	}
	if m.Endpoint != "" {
		opts = append(opts, option.WithBaseURL(m.Endpoint))
	}
	client := openai.NewClient(opts...)
	base := chatMessages(agents.Messages(*req))
	control := tools(req)
	return agents.Converse(ctx, req, func(ctx context.Context, exchanges []agents.Exchange, offered []agents.OfferedTool) (*agents.Reply, error) {
		params := openai.ChatCompletionNewParams{Model: m.Name, Messages: append(append([]openai.ChatCompletionMessageParamUnion(nil), base...), exchangeMessages(exchanges)...)}
		if offered == nil && len(exchanges) > 0 {
			params.Messages = append(params.Messages, openai.UserMessage(lastRequest))
		}
		params.Tools = append(append(params.Tools, control...), offeredTools(offered)...)
		if m.MaxOutputTokens != nil {
			limit := int64(*m.MaxOutputTokens)
			if req.Continuation != "" {
				// A cut answer is continued with a larger limit, doubling each attempt.
				limit = min(limit<<req.Attempt, maxContinuationTokens)
			}
			params.MaxCompletionTokens = openai.Int(limit)
		}
		if m.Temperature != nil {
			params.Temperature = openai.Float(*m.Temperature)
		}
		if req.Agent.OutputSchema != nil && len(params.Tools) == 0 {
			var schema map[string]any
			if json.Unmarshal(req.Agent.OutputSchema.Raw, &schema) == nil {
				params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "output", Schema: schema}}}
			}
		}
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return nil, describeError(err, key)
		}
		if resp == nil || len(resp.Choices) == 0 {
			return nil, errors.New("the model server answered with no choices")
		}
		r, err := reply(req, resp, offered)
		return &r, err
	})
}

// reply reads a model's answer: the calls of offered tools it asks for, or else the step's
// answer, with its handoff, fan-out, signal or routing. Calls of offered tools come first: a
// handoff in the same answer is dropped, and the model hands off once it has the results. An
// answer that cannot be used (a malformed fan-out) is an error, with the reply's usage.
func reply(req *agents.Request, resp *openai.ChatCompletion, offered []agents.OfferedTool) (agents.Reply, error) {
	choice := resp.Choices[0]
	out := agents.Reply{Text: choice.Message.Content, Tokens: resp.Usage.TotalTokens, InputTokens: resp.Usage.PromptTokens,
		CachedInputTokens: resp.Usage.PromptTokensDetails.CachedTokens}
	byName := make(map[string]agents.OfferedTool, len(offered))
	for _, t := range offered {
		byName[t.Name] = t
	}
	var calls []toolCall
	for _, c := range choice.Message.ToolCalls {
		if t, ok := byName[c.Function.Name]; ok {
			args := json.RawMessage(c.Function.Arguments)
			if !json.Valid(args) {
				args = json.RawMessage(`{}`)
			}
			out.Calls = append(out.Calls, workflow.ToolCall{ID: c.ID, Server: t.Server, Tool: t.Tool, Arguments: args})
			continue
		}
		calls = append(calls, toolCall{name: c.Function.Name, arguments: c.Function.Arguments})
	}
	if len(out.Calls) > 0 {
		return out, nil
	}
	res := workflow.Result{Output: choice.Message.Content, FinishReason: v1alpha1.FinishStop}
	if choice.FinishReason == "length" {
		res.FinishReason = v1alpha1.FinishLength
	}
	err := applyToolCalls(&res, req, calls)
	out.Final = res
	return out, err
}

// exchangeMessages are the step's tool exchanges so far: each turn as the assistant's message
// with its calls, then one tool message per call with its outcome.
func exchangeMessages(exchanges []agents.Exchange) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	for _, ex := range exchanges {
		msg := openai.ChatCompletionAssistantMessageParam{}
		if ex.Turn.Text != "" {
			msg.Content.OfString = openai.String(ex.Turn.Text)
		}
		for _, c := range ex.Turn.Calls {
			msg.ToolCalls = append(msg.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: agents.FunctionName(c.Server, c.Tool), Arguments: string(c.Arguments)},
			}})
		}
		out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &msg})
		for i, c := range ex.Turn.Calls {
			content := "no result"
			if i < len(ex.Outcomes) {
				content = ex.Outcomes[i].Content
				if ex.Outcomes[i].IsError {
					content = "error: " + content
				}
			}
			out = append(out, openai.ToolMessage(content, c.ID))
		}
	}
	return out
}

// offeredTools are the agent's tools as functions the model may call.
func offeredTools(offered []agents.OfferedTool) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(offered))
	for _, t := range offered {
		params := shared.FunctionParameters{"type": "object"}
		if len(t.InputSchema) > 0 {
			var schema map[string]any
			if json.Unmarshal(t.InputSchema, &schema) == nil {
				params = schema
			}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	return out
}

// apiKey reads the agent's API key from its Secret, if it names one.
func (o *openAI) apiKey(ctx context.Context, req *agents.Request) (string, error) {
	ref := req.Agent.Model.APIKeySecretRef
	if ref == nil {
		return "none", nil // servers such as vLLM or Ollama need no key
	}
	if o.deps.Secrets == nil {
		return "", errors.New("no Secret reader is configured")
	}
	return o.deps.Secrets.SecretKey(ctx, req.KeyNamespace(), ref.Name, ref.Key)
}

// describeError says what the server answered, without the key.
func describeError(err error, key string) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		return fmt.Errorf("the model server answered %d %s: %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode), agents.Scrub(msg, key))
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("calling the model server: %s", agents.Scrub(err.Error(), key))
}

func chatMessages(msgs []workflow.Message) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case "system":
			out = append(out, openai.SystemMessage(m.Content))
		case "assistant":
			out = append(out, openai.AssistantMessage(m.Content))
		default:
			out = append(out, openai.UserMessage(m.Content))
		}
	}
	return out
}

// tools offers the agent's handoffs, its fan-out, the declared signals and, for a supervisor,
// routing.
func tools(req *agents.Request) []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, p := range req.Peers {
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        toolName(p.Name),
			Description: openai.String(fmt.Sprintf("Hand the work to %s: %s", p.Name, p.Description)),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
				"reason": map[string]any{"type": "string", "description": "Why you hand off"},
			}},
		}))
	}
	if fanOut, ok := fanOutTool(req); ok {
		out = append(out, fanOut)
	}
	if len(req.Signals) > 0 {
		names := make([]string, len(req.Signals))
		for i, s := range req.Signals {
			names[i] = s.Name
		}
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        toolSignal,
			Description: openai.String("Emit one of the workflow's signals."),
			Parameters: shared.FunctionParameters{"type": "object", "required": []string{"signal"}, "properties": map[string]any{
				"signal": map[string]any{"type": "string", "enum": names},
			}},
		}))
	}
	if len(req.Children) > 0 {
		names := make([]string, len(req.Children))
		for i, c := range req.Children {
			names[i] = c.Name
		}
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        toolRoute,
			Description: openai.String("Route the work to the agent best suited for it."),
			Parameters: shared.FunctionParameters{"type": "object", "required": []string{"target", "confidence", "reason"}, "properties": map[string]any{
				"target":     map[string]any{"type": "string", "enum": names},
				"confidence": map[string]any{"type": "number", "minimum": 0, "maximum": 1},
				"reason":     map[string]any{"type": "string"},
				"fallback":   map[string]any{"type": "string", "enum": names},
			}},
		}))
	}
	return out
}
