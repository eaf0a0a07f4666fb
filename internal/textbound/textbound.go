// Package textbound cuts texts to a bound in the unit they are kept in, on a character boundary.
// Each place keeps text in its own unit, and a bound counted in another would let a text past
// the place's limit or cut it far below:
//
//   - Status: bytes of JSON as the API server writes it (Go's encoder: <, > and & as six bytes,
//     like control characters), for texts in an object's status.
//   - Stored: bytes of JSON as the transcript keeps it (<, > and & as they are; control
//     characters as six bytes), for what a step keeps.
//   - Bytes: bytes of UTF-8, for Event notes and error messages.
//   - Line: characters on one line, for what a person reads in a terminal or a page.
//
// It imports nothing but the standard library, so the workflow core may use it.
package textbound

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mark ends a text that was cut.
const Mark = "…"

// Status is s as a text of at most n bytes as the API server stores it: as it is when it fits,
// else cut with Mark. Invalid UTF-8 is replaced, so it is always valid.
func Status(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if FitsStatus(s, n) {
		return s
	}
	size, cut := 0, 0
	for i, r := range s {
		size += statusRuneLen(r, s[i:])
		if size > n-len(Mark) {
			break
		}
		cut = i + utf8.RuneLen(r)
	}
	return s[:cut] + Mark
}

// FitsStatus reports whether s takes at most n bytes as the API server stores it. A text is never
// shorter stored than it is, so one longer than n bytes is not read through.
func FitsStatus(s string, n int) bool {
	return len(s) <= n && StatusLen(s) <= n
}

// StatusLen is the bytes s takes inside a JSON string as Go (and so the API server) writes it,
// or a little more: an upper bound.
func StatusLen(s string) int {
	n := 0
	for i, r := range s {
		n += statusRuneLen(r, s[i:])
	}
	return n
}

// statusRuneLen is the bytes r, found at the start of rest, takes inside a JSON string.
func statusRuneLen(r rune, rest string) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	case r == utf8.RuneError:
		if _, size := utf8.DecodeRuneInString(rest); size == 1 {
			return 6 // invalid UTF-8 is written as \ufffd
		}
	}
	return utf8.RuneLen(r)
}

// StoredLen is the length of s's JSON string encoding, quotes aside, as the transcript keeps it.
func StoredLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += storedRuneLen(r, size)
		i += size
	}
	return n
}

// Stored cuts s on a character boundary so that its JSON encoding, quotes aside, takes at most n
// bytes as the transcript keeps it.
func Stored(s string, n int) string {
	if len(s) <= n/6 {
		return s // even all escaped it fits
	}
	used := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if used += storedRuneLen(r, size); used > n {
			return s[:i]
		}
		i += size
	}
	return s
}

// StoredNoted is s within n bytes as the transcript keeps it, saying how long it was when it
// was cut.
func StoredNoted(s string, n int) string {
	if len(s) <= n/6 || StoredLen(s) <= n {
		return s
	}
	note := "…[truncated: " + strconv.Itoa(len(s)) + " bytes in all]"
	return Stored(s, n-len(note)) + note
}

func storedRuneLen(r rune, size int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1:
		return 6
	}
	return size
}

// Bytes cuts s to at most n bytes on a character boundary.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// BytesMarked is s within n bytes, ending with Mark when it was cut.
func BytesMarked(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Bytes(s, n-len(Mark)) + Mark
}

// Line is s on one line (its runs of white space made one space) within n characters, ending
// with Mark when it was cut.
func Line(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + Mark
	}
	return s
}
