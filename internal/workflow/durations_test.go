package workflow

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A config stored before the API server bounded durations holds values Go cannot read. It must
// still decode, since one object that fails to decode stops the operator's watch of every
// object of its kind, and its runs must end ConfigInvalid naming the field.
func TestDurationsGoCannotReadDecodeAndMakeTheConfigInvalid(t *testing.T) {
	raw := `{"entrypoint": "a", "limits": {"timeout": "99999999999h", "agentTimeout": "-5s"},
		"agents": [{"name": "a", "timeout": "2562048h", "script": [{"delay": "soon"}]}],
		"approvals": [{"name": "g", "after": "a", "timeout": "9000h"}]}`
	var spec v1alpha1.AgentConfigSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("the config does not decode: %v", err)
	}
	overrides := &v1alpha1.LimitOverrides{Timeout: ptrDuration("1e3h")}
	_, errs := NewPlan(spec, overrides)
	got := errs.ToAggregate().Error()
	for _, want := range []string{
		`spec.limits.timeout: Invalid value: "99999999999h": "99999999999h" is not a duration such as 90s or 1h30m`,
		`spec.limits.agentTimeout: Invalid value: "-5s": -5s is not between 0s and 8760h (a year)`,
		`spec.agents[0].timeout: Invalid value: "2562048h"`,
		`spec.agents[0].script[0].delay: Invalid value: "soon"`,
		`spec.approvals[0].timeout: Invalid value: "9000h"`,
		`spec.limits.timeout: Invalid value: "1e3h"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q among the errors, got %s", want, got)
		}
	}
}

func ptrDuration(s string) *v1alpha1.Duration {
	d := v1alpha1.Duration(s)
	return &d
}
