package workflow

import (
	"strings"
)

// detectSignal is the declared signal a step emitted: its structured signal when that is
// declared, else the last marker line of its output. A marker line starts with the signal's
// name, alone or followed by ':' or a space ("MEMORY_FOUND: cached fix" or "TERMINATE_WORKFLOW").
// Signals the config does not declare do not count.
func detectSignal(p *Plan, res StepResult) string {
	if _, ok := p.Signal(res.Signal); ok {
		return res.Signal
	}
	found := ""
	for _, line := range strings.Split(res.Output, "\n") {
		line = strings.Trim(strings.TrimSpace(line), "*_`#> ")
		name, _, _ := strings.Cut(line, ":")
		name, _, _ = strings.Cut(name, " ")
		if _, ok := p.Signal(name); ok {
			found = name
		}
	}
	return found
}
