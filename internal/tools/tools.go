// Package tools is the operator's tool clients: MCP servers over streamable HTTP, through the
// official MCP Go SDK, and plain HTTP tools. A Pool hands out one client per server in use; the
// AgentRun controller asks it for the tools an agent is offered and makes the calls the model
// asks for. Nothing here starts a process: tool servers run on their own.
package tools

import (
	"context"
	"encoding/json"
)

// Tool is one tool a model may be offered.
type Tool struct {
	// Server is the name of the config's tool server.
	Server string `json:"server"`
	// Name is the tool's name on its server.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the arguments: an object schema.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Call is one call of a tool.
type Call struct {
	// Tool is the tool's name on its server.
	Tool string
	// Arguments are a JSON object.
	Arguments json.RawMessage
	// IdempotencyKey is the same every time this call is sent: <run UID>/<step>/<call>. HTTP
	// tools get it as the Idempotency-Key header, MCP servers in the request's _meta.
	IdempotencyKey string
}

// Result is a call's outcome, as the model is given it.
type Result struct {
	// Content is the text the model is given: the structured result as JSON when the tool
	// gave one, else its text content.
	Content string `json:"content"`
	// Structured is the structured result, when the tool gave one.
	Structured json.RawMessage `json:"structured,omitempty"`
	// IsError is set when the tool reported an error: an MCP error result, an HTTP status
	// other than 2xx, a result that does not match the tool's output schema.
	IsError bool `json:"isError,omitempty"`
}

// Client speaks to one tool server.
type Client interface {
	// Tools lists the server's tools.
	Tools(ctx context.Context) ([]Tool, error)
	// Call makes one call. An error is a failure to get any answer (connection refused, a
	// timeout, a broken protocol exchange); the caller gives it to the model as an error result.
	Call(ctx context.Context, call Call) (Result, error)
}

// IdempotencyMetaKey is the _meta key an MCP request carries the call's idempotency key in.
const IdempotencyMetaKey = "agents.baton.dev/idempotency-key"

// MaxResultBytes bounds the content of one result given to a model and kept in the transcript,
// in bytes as the transcript stores it (textbound.StoredLen).
const MaxResultBytes = 256 << 10
