package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/api/v1alpha1"
	amount "github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/textbound"
)

// maxExpectBytes bounds an expect.yaml: a folder of tests may come from anywhere.
const maxExpectBytes = 1 << 20

// quotedOutputBytes bounds the output a failure quotes.
const quotedOutputBytes = 200

// expectation is what a case's expect.yaml says its replay must come to (docs/replay.md#tests).
// Each field left out is not checked.
type expectation struct {
	// Reason is the termination reason the replayed run must end with.
	Reason v1alpha1.TerminationReason `json:"reason,omitempty"`
	// Path is the replayed run's whole handoff sequence, and PathPrefix its beginning: each
	// "FROM -> TO", or "FROM -> TO (OUTCOME)", with TO "-" when the step gave control to no
	// agent. A step written without its outcome matches any outcome.
	Path       []string `json:"path,omitempty"`
	PathPrefix []string `json:"pathPrefix,omitempty"`
	// MaxTokens and MaxCost are the most tokens and cost the replayed run may use.
	MaxTokens *int64      `json:"maxTokens,omitempty"`
	MaxCost   decimalText `json:"maxCost,omitempty"`
	// Gates are the gates the replayed run reaches, in the order it first reaches them; an
	// empty list says it reaches none.
	Gates []string `json:"gates"`
	// OutputContains is text the replayed run's output must contain.
	OutputContains string `json:"outputContains,omitempty"`
	// Stopped says the replay stops early, and is text its reason must contain. Without it, a
	// replay that stops early fails.
	Stopped string `json:"stopped,omitempty"`

	// path and pathPrefix, read.
	path, prefix []handoff
}

// decimalText is an amount written as a string, as the API writes amounts ("0.05"): a YAML
// number would go through a float and could lose digits.
type decimalText string

func (d *decimalText) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf(`maxCost %s: quote it, such as "0.05"`, textbound.BytesMarked(string(data), 40))
	}
	*d = decimalText(s)
	return nil
}

// handoff is one step of an expected path.
type handoff struct {
	From, To string
	// Outcome is empty when any outcome matches.
	Outcome v1alpha1.StepOutcome
}

// readExpectation reads an expect.yaml, refusing fields it does not know.
func readExpectation(data []byte) (*expectation, error) {
	e := &expectation{}
	if err := yaml.UnmarshalStrict(data, e); err != nil {
		return nil, err
	}
	if e.Reason == "" && e.Path == nil && e.PathPrefix == nil && e.MaxTokens == nil && e.MaxCost == "" &&
		e.Gates == nil && e.OutputContains == "" && e.Stopped == "" {
		return nil, errors.New("it expects nothing: give at least one of reason, path, pathPrefix, maxTokens, maxCost, gates, outputContains or stopped")
	}
	if e.Path != nil && e.PathPrefix != nil {
		return nil, errors.New("give path or pathPrefix, not both")
	}
	if e.MaxTokens != nil && *e.MaxTokens < 0 {
		return nil, fmt.Errorf("maxTokens %d is negative", *e.MaxTokens)
	}
	if e.MaxCost != "" {
		if _, err := amount.Parse(string(e.MaxCost)); err != nil {
			return nil, fmt.Errorf("maxCost: %w", err)
		}
	}
	var err error
	if e.path, err = parsePath("path", e.Path); err != nil {
		return nil, err
	}
	if e.prefix, err = parsePath("pathPrefix", e.PathPrefix); err != nil {
		return nil, err
	}
	return e, nil
}

func parsePath(field string, steps []string) ([]handoff, error) {
	out := make([]handoff, 0, len(steps))
	for i, s := range steps {
		h, err := parseHandoff(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, h)
	}
	return out, nil
}

// parseHandoff reads "FROM -> TO" or "FROM -> TO (OUTCOME)", as the replay's report prints a
// handoff.
func parseHandoff(s string) (handoff, error) {
	text := strings.TrimSpace(s)
	var h handoff
	if strings.HasSuffix(text, ")") {
		if i := strings.LastIndex(text, " ("); i >= 0 {
			h.Outcome = v1alpha1.StepOutcome(strings.TrimSpace(text[i+2 : len(text)-1]))
			text = text[:i]
		}
	}
	from, to, found := strings.Cut(text, "->")
	h.From, h.To = strings.TrimSpace(from), strings.TrimSpace(to)
	if !found || h.From == "" || h.To == "" {
		return handoff{}, fmt.Errorf(`%q: write "FROM -> TO", with TO "-" when the step gave control to no agent`, textbound.BytesMarked(s, 80))
	}
	if h.To == "-" {
		h.To = ""
	}
	return h, nil
}

// matches reports whether the handoff record is the expected step.
func (h handoff) matches(r v1alpha1.HandoffRecord) bool {
	return h.From == r.From && h.To == r.To && (h.Outcome == "" || h.Outcome == r.Outcome)
}

func (h handoff) String() string {
	s := h.From + " -> " + orDash(h.To)
	if h.Outcome != "" {
		s += " (" + string(h.Outcome) + ")"
	}
	return s
}

// check says which expectations the replay did not meet, one line each, in the order of the
// fields; none when it met them all.
func (e *expectation) check(r replay.Report) []string {
	got := r.Replayed
	var out []string
	fail := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	switch {
	case r.Stopped != "" && e.Stopped == "":
		fail("the replay stopped early: %s", r.Stopped)
	case r.Stopped == "" && e.Stopped != "":
		fail("stopped: the replay did not stop early, want it stopped saying %q", e.Stopped)
	case !strings.Contains(r.Stopped, e.Stopped):
		fail("stopped: the replay stopped saying %q, want %q in it", r.Stopped, e.Stopped)
	}
	if e.Reason != "" && got.Reason != e.Reason {
		fail("reason: the replayed run ended %s, want %s", orDash(string(got.Reason)), e.Reason)
	}
	if e.Path != nil {
		out = append(out, checkPath("path", e.path, got.Path, true)...)
	}
	if e.PathPrefix != nil {
		out = append(out, checkPath("pathPrefix", e.prefix, got.Path, false)...)
	}
	if e.MaxTokens != nil && got.Tokens > *e.MaxTokens {
		fail("maxTokens: the replayed run used %d tokens, more than %d", got.Tokens, *e.MaxTokens)
	}
	if e.MaxCost != "" {
		limit, _ := amount.Parse(string(e.MaxCost))
		spent, err := amount.Parse(cmp.Or(got.Cost, "0"))
		switch {
		case err != nil:
			fail("maxCost: the replayed run's cost %q cannot be read: %v", got.Cost, err)
		case spent.GreaterThan(limit):
			fail("maxCost: the replayed run cost %s, more than %s", amount.Format(spent), amount.Format(limit))
		}
	}
	if e.Gates != nil && !slices.Equal(got.Gates, e.Gates) {
		fail("gates: the replayed run reached %s, want %s", gateList(got.Gates), gateList(e.Gates))
	}
	switch {
	case e.OutputContains == "" || strings.Contains(got.Output, e.OutputContains):
	case got.Output == "":
		fail("outputContains: the replayed run has no output, want one containing %q", e.OutputContains)
	default:
		fail("outputContains: the replayed run's output does not contain %q; it is %q",
			e.OutputContains, textbound.BytesMarked(got.Output, quotedOutputBytes))
	}
	return out
}

// checkPath compares a replayed path with the expected one, or its beginning, and says where
// they differ first.
func checkPath(field string, want []handoff, got []v1alpha1.HandoffRecord, whole bool) []string {
	for i, h := range want {
		if i >= len(got) {
			return []string{fmt.Sprintf("%s: the replayed path ends after %d handoffs, want handoff %d %s", field, len(got), i+1, h)}
		}
		if !h.matches(got[i]) {
			return []string{fmt.Sprintf("%s: handoff %d is %s, want %s", field, i+1, handoffAt(got, i), h)}
		}
	}
	if whole && len(got) > len(want) {
		return []string{fmt.Sprintf("%s: the replayed path goes on past the %d handoffs expected: handoff %d is %s",
			field, len(want), len(want)+1, handoffAt(got, len(want)))}
	}
	return nil
}

func gateList(gates []string) string {
	if len(gates) == 0 {
		return "no gate"
	}
	return "[" + strings.Join(gates, ", ") + "]"
}
