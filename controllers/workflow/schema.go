package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxRepairs is how many times an agent is asked to repair an answer that does not match its
// outputSchema; after that the run ends InvalidOutput.
const maxRepairs = 2

// compileSchemas compiles the agents' output schemas; a schema that does not compile makes the
// config invalid.
func (p *Plan) compileSchemas(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range p.Spec.Agents {
		if a.OutputSchema == nil || len(a.OutputSchema.Raw) == 0 {
			continue
		}
		schemaPath := path.Child("agents").Index(i).Child("outputSchema")
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.OutputSchema.Raw))
		if err != nil {
			errs = append(errs, field.Invalid(schemaPath, "", fmt.Sprintf("not JSON: %v", err)))
			continue
		}
		c := jsonschema.NewCompiler()
		url := "baton:///agents/" + a.Name + "/outputSchema.json"
		if err := c.AddResource(url, doc); err != nil {
			errs = append(errs, field.Invalid(schemaPath, "", err.Error()))
			continue
		}
		sch, err := c.Compile(url)
		if err != nil {
			errs = append(errs, field.Invalid(schemaPath, "", fmt.Sprintf("not a valid JSON Schema: %v", err)))
			continue
		}
		if p.schemas == nil {
			p.schemas = map[string]*jsonschema.Schema{}
		}
		p.schemas[a.Name] = sch
	}
	return errs
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
