package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxRepairs is how many times an agent is asked to repair an answer that does not match its
// outputSchema; after that the run ends InvalidOutput.
const maxRepairs = 2

// Bounds of an output schema: its size in bytes and how deeply its objects and arrays nest.
const (
	maxSchemaBytes = 64 << 10
	maxSchemaDepth = 32
)

// compileSchemas compiles the agents' output schemas; a schema that does not compile makes the
// config invalid.
func (p *Plan) compileSchemas(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range p.Spec.Agents {
		if a.OutputSchema == nil || len(a.OutputSchema.Raw) == 0 {
			continue
		}
		sch, err := CompileSchema("baton:///agents/"+a.Name+"/outputSchema.json", a.OutputSchema.Raw)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("agents").Index(i).Child("outputSchema"), field.OmitValueType{}, err.Error()))
			continue
		}
		if p.schemas == nil {
			p.schemas = map[string]*jsonschema.Schema{}
		}
		p.schemas[a.Name] = sch
	}
	return errs
}

// CompileSchema compiles a JSON Schema held in a config. Only references inside the schema
// itself resolve (and the drafts' own metaschemas, which the library carries): a $ref or
// $schema naming a file or any URL is refused, never read or fetched, so a config can neither
// read the operator's files nor make it call out.
func CompileSchema(url string, raw []byte) (*jsonschema.Schema, error) {
	if len(raw) > maxSchemaBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d a schema may have", len(raw), maxSchemaBytes)
	}
	if depth := jsonDepth(raw); depth > maxSchemaDepth {
		return nil, fmt.Errorf("nested %d levels deep, more than the %d a schema may be", depth, maxSchemaDepth)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoads{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	var refused *jsonschema.LoadURLError
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("refers to %s: only references inside the schema itself (\"#...\") resolve; Baton never reads a file or fetches a URL for a schema", refused.URL)
	case err != nil:
		return nil, fmt.Errorf("not a valid JSON Schema: %w", err)
	}
	// A schema whose references go round without consuming anything ("$ref": "#") matches no
	// answer at all; one probe finds it now rather than at every answer.
	var verr *jsonschema.ValidationError
	if errors.As(sch.Validate(nil), &verr) && refCycle(verr) {
		return nil, errors.New("its references go round in a cycle (such as \"$ref\": \"#\"), so no answer could match it")
	}
	return sch, nil
}

func refCycle(e *jsonschema.ValidationError) bool {
	if _, ok := e.ErrorKind.(*kind.RefCycle); ok {
		return true
	}
	for _, c := range e.Causes {
		if refCycle(c) {
			return true
		}
	}
	return false
}

// refuseLoads is the schema compiler's loader: it loads nothing.
type refuseLoads struct{}

func (refuseLoads) Load(string) (any, error) {
	return nil, errors.New("external references are refused")
}

// jsonDepth is how deeply objects and arrays nest in a JSON document (0 for a scalar; a
// document that does not parse is left to the JSON decoder to report).
func jsonDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	return deepest
}

// validateOutput checks an agent's answer against its outputSchema. It returns the structured
// value as compact JSON, or why the answer does not match.
func (p *Plan) validateOutput(agent, output string) (normalized string, problems string, ok bool) {
	sch, has := p.schemas[agent]
	if !has {
		return output, "", true
	}
	value, err := jsonschema.UnmarshalJSON(strings.NewReader(jsonPart(output)))
	if err != nil {
		return "", fmt.Sprintf("the answer is not a JSON value: %v", err), false
	}
	if err := sch.Validate(value); err != nil {
		return "", strings.TrimSpace(strings.TrimPrefix(err.Error(), "jsonschema validation failed with 'baton:///agents/"+agent+"/outputSchema.json#'")), false
	}
	compact, _ := json.Marshal(value)
	return string(compact), "", true
}

// jsonPart takes the JSON out of a model's answer that wraps it in a Markdown code fence.
func jsonPart(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimPrefix(t, "json")
		if i := strings.LastIndex(t, "```"); i >= 0 {
			t = t[:i]
		}
	}
	return strings.TrimSpace(t)
}
