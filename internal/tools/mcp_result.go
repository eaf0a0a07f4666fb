package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// maxDescriptionBytes bounds a tool's description as models are offered it.
const maxDescriptionBytes = 4096

// toolList is a server's tools as listed once.
type toolList struct {
	tools []Tool
	// schemas has an entry for every tool: its compiled output schema, or nil for a tool that
	// declares none or one that does not compile.
	schemas map[string]*outputSchema
	at      time.Time
	gen     uint64
	seq     uint64
}

// outputSchema is a compiled output schema and the URL it was compiled under, which the
// validator's messages name.
type outputSchema struct {
	url    string
	schema *jsonschema.Schema
}

// newToolList converts a server's tools. An output schema that does not compile is the
// server's fault, not the model's: the tool's results then go unvalidated, and the listing
// logs why.
func newToolList(ctx context.Context, server string, listed []*mcp.Tool, redact redactor) *toolList {
	l := &toolList{schemas: make(map[string]*outputSchema, len(listed))}
	for _, t := range listed {
		if t == nil || t.Name == "" {
			continue
		}
		input := json.RawMessage(`{"type":"object"}`)
		if t.InputSchema != nil {
			if raw, err := json.Marshal(t.InputSchema); err == nil && string(raw) != "null" {
				input = raw
			}
		}
		description := t.Description
		if description == "" {
			description = t.Title
		}
		l.tools = append(l.tools, Tool{Server: server, Name: t.Name, InputSchema: input,
			Description: textbound.Bytes(redact.text(description), maxDescriptionBytes)})
		l.schemas[t.Name] = nil
		if t.OutputSchema == nil {
			continue
		}
		raw, err := json.Marshal(t.OutputSchema)
		if err != nil || string(raw) == "null" {
			continue
		}
		sch, err := compileOutputSchema(server, t.Name, raw)
		if err != nil {
			log.FromContext(ctx).Info("Tool output schema does not compile: its results go unvalidated",
				"server", server, "tool", t.Name, "error", redact.text(err.Error()))
			continue
		}
		l.schemas[t.Name] = sch
	}
	return l
}

// compileOutputSchema compiles a tool's output schema; it may refer to nothing outside itself.
func compileOutputSchema(server, tool string, raw []byte) (*outputSchema, error) {
	u := "baton:///toolservers/" + url.PathEscape(server) + "/" + url.PathEscape(tool) + "/outputSchema.json"
	sch, err := workflow.CompileSchema(u, raw)
	if err != nil {
		return nil, err
	}
	return &outputSchema{url: u, schema: sch}, nil
}

// check validates a result against the schema, saying why it does not match.
func (s *outputSchema) check(structured json.RawMessage) (problems string, ok bool) {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(structured))
	if err != nil {
		return fmt.Sprintf("the result is not JSON: %v", err), false
	}
	if err := s.schema.Validate(value); err != nil {
		msg := strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+s.url+"#'")
		return strings.TrimSpace(msg), false
	}
	return "", true
}

// resultOf is an MCP call's result as the model is given it: the structured content as JSON
// when there is some (checked against the tool's output schema), else the text contents, with
// the other contents described rather than given.
func resultOf(res *mcp.CallToolResult, schema *outputSchema, redact redactor) Result {
	if res == nil {
		return Result{IsError: true, Content: "the server answered no result"}
	}
	out := Result{IsError: res.IsError}
	if res.StructuredContent != nil {
		structured, err := json.Marshal(res.StructuredContent)
		if err == nil && string(structured) != "null" {
			if schema != nil && !res.IsError {
				if problems, ok := schema.check(structured); !ok {
					return Result{IsError: true, Content: textbound.StoredNoted("the tool's result does not match its output schema: "+redact.text(problems), MaxResultBytes)}
				}
			}
			return structuredResult(redact.json(structured), out.IsError)
		}
	}
	text := contentText(res.Content)
	if schema != nil && !res.IsError {
		return Result{IsError: true, Content: textbound.StoredNoted("the tool declares an output schema but gave no structured result; it said: "+redact.text(text), MaxResultBytes)}
	}
	out.Content = textbound.StoredNoted(redact.text(text), MaxResultBytes)
	return out
}

// structuredResult is a result whose content is a JSON document. One too large for a model is
// given cut, as text, without its structured form.
func structuredResult(doc json.RawMessage, isError bool) Result {
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err == nil {
		doc = compact.Bytes()
	}
	if textbound.StoredLen(string(doc)) > MaxResultBytes {
		return Result{Content: textbound.StoredNoted(string(doc), MaxResultBytes), IsError: isError}
	}
	return Result{Content: string(doc), Structured: doc, IsError: isError}
}

// contentText joins a result's contents: text as it is, the rest described by kind, type,
// size and URI.
func contentText(contents []mcp.Content) string {
	parts := make([]string, 0, len(contents))
	for _, c := range contents {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			size := ""
			if c.Size != nil {
				size = fmt.Sprintf(", %d bytes", *c.Size)
			}
			parts = append(parts, fmt.Sprintf("[resource link: %s %s (%s%s)]", c.Name, c.URI, orUnknown(c.MIMEType), size))
		case *mcp.EmbeddedResource:
			parts = append(parts, describeResource(c.Resource))
		case nil:
		default:
			parts = append(parts, fmt.Sprintf("[content of type %T]", c))
		}
	}
	return strings.Join(parts, "\n")
}

func describeResource(r *mcp.ResourceContents) string {
	if r == nil {
		return "[embedded resource]"
	}
	if r.Text != "" {
		return fmt.Sprintf("[embedded resource: %s (%s, %d bytes of text)]", r.URI, orUnknown(r.MIMEType), len(r.Text))
	}
	return fmt.Sprintf("[embedded resource: %s (%s, %d bytes)]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
}

func orUnknown(mime string) string {
	if mime == "" {
		return "type unknown"
	}
	return mime
}
