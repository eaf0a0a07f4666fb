package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Bounds of what the status holds, below the API's own limits.
const (
	maxInput    = 32768
	maxOutput   = 16384
	maxReason   = 256
	maxMessage  = 1024
	maxSequence = 50
)

// bounded cuts s to at most n characters, marking the cut.
func bounded(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	const mark = "…"
	r := []rune(s)
	return string(r[:n-1]) + mark
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// digest is a short, stable digest of a step's input or output.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// quoteName shows a name that came from a model: as it is when it is a valid agent name,
// quoted and cut otherwise, so that Events and messages never carry free text.
func quoteName(s string) string {
	if len(validation.IsDNS1123Label(s)) == 0 {
		return s
	}
	return strconv.Quote(bounded(s, 63))
}

// toolToken shows a tool name a model gave: as it is when it is a plausible tool name, quoted and
// cut otherwise.
func toolToken(s string) string {
	if toolName.MatchString(s) {
		return s
	}
	return strconv.Quote(bounded(s, 63))
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Context window bounds: entries kept, characters per entry.
const (
	maxContext     = 6
	maxContextText = 2048
)

// addContext adds an entry to the window the next agent sees, dropping the oldest.
func addContext(s *v1alpha1.AgentRunStatus, from string, kind v1alpha1.ContextKind, text string) {
	s.Context = append(s.Context, v1alpha1.ContextEntry{Step: s.StepCount, From: from, Kind: kind, Text: bounded(text, maxContextText)})
	if over := len(s.Context) - maxContext; over > 0 {
		s.Context = append([]v1alpha1.ContextEntry(nil), s.Context[over:]...)
	}
}

// appendRecord adds a step to the handoff sequence, dropping the oldest beyond the bound.
func appendRecord(s *v1alpha1.AgentRunStatus, r v1alpha1.HandoffRecord) {
	s.HandoffSequence = append(s.HandoffSequence, r)
	if over := len(s.HandoffSequence) - maxSequence; over > 0 {
		s.HandoffSequence = append([]v1alpha1.HandoffRecord(nil), s.HandoffSequence[over:]...)
	}
}
