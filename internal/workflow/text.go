package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/textbound"
)

// Every text the core writes, in status or in an Event, is bounded in bytes as the API server
// stores it: inside a JSON string, where it writes <, >, & and control characters as six bytes
// each, so that n characters of HTML would take up to 6n bytes of the object (docs/security.md,
// "Status stays small"). statusLen measures in that unit, fitsStatus checks and statusText cuts.
// A text of n such bytes has at most n characters, so the same bound holds in characters too.
// People's values are bounded in characters, as they write them (decisions.MaxValue, refuse).

// Bounds of what the status holds, in bytes as stored, below the API's own limits.
const (
	maxInput    = 32768
	maxOutput   = 16384
	maxReason   = 256
	maxMessage  = 1024
	maxSequence = 50
	// maxStoredInput is how much of the next agent's input status holds; the transcript
	// holds it whole (see StoreInput).
	maxStoredInput = 512
	// maxValue bounds a question, a feedback and a held call's arguments in status. A person's
	// value may have as many characters (decisions.MaxValue), so one full of escaped characters
	// is cut here.
	maxValue = decisions.MaxValue
)

// StoreInput makes the status what the API server keeps: an input longer than maxStoredInput is
// cut to its beginning, and inputDigest names the whole, so that a status write does not grow
// with what agents say. It returns the whole input, which the caller keeps (and can always find
// again in the transcript: see IsInput). s must hold the whole input.
func StoreInput(s *v1alpha1.AgentRunStatus) string {
	whole := s.Input
	s.InputDigest = ""
	if !fitsStatus(whole, maxStoredInput) {
		s.Input = statusText(whole, maxStoredInput)
		s.InputDigest = digest(whole)
	}
	return whole
}

// IsInput reports whether text is the whole input of a status that holds only its beginning.
func IsInput(s *v1alpha1.AgentRunStatus, text string) bool {
	return s.InputDigest != "" && digest(text) == s.InputDigest
}

// statusText is s as a text of at most n bytes as the API server stores it (textbound.Status).
func statusText(s string, n int) string { return textbound.Status(s, n) }

// statusLen is the bytes s takes as the API server stores it (textbound.StatusLen).
func statusLen(s string) int { return textbound.StatusLen(s) }

// fitsStatus reports whether s takes at most n bytes as the API server stores it.
func fitsStatus(s string, n int) bool { return textbound.FitsStatus(s, n) }

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
	return strconv.Quote(statusText(s, 63))
}

// toolToken shows a tool name a model gave: as it is when it is a plausible tool name, quoted and
// cut otherwise.
func toolToken(s string) string {
	if toolName.MatchString(s) {
		return s
	}
	return strconv.Quote(statusText(s, 63))
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

// addContext adds an entry to what later agents see.
func addContext(d *Update, from string, kind ContextKind, text string) {
	d.Context = append(d.Context, ContextEntry{Step: d.Status.StepCount, From: from, Kind: kind, Text: text})
}

// appendRecord adds a step to the handoff sequence, dropping the oldest beyond the bound.
func appendRecord(s *v1alpha1.AgentRunStatus, r v1alpha1.HandoffRecord) {
	s.HandoffSequence = append(s.HandoffSequence, r)
	if over := len(s.HandoffSequence) - maxSequence; over > 0 {
		s.HandoffSequence = append([]v1alpha1.HandoffRecord(nil), s.HandoffSequence[over:]...)
	}
}
