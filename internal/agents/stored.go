package agents

import (
	"unicode/utf8"
)

// What a step keeps is bounded in the unit it is stored in: bytes of the JSON the transcript
// holds, not characters or bytes of text. JSON writes a quote, a backslash and \n, \r, \t as two
// bytes each, and every other control character, U+2028, U+2029 and an invalid byte as six
// (\u0001); the transcript writes <, > and & as they are. So an answer of control characters
// takes six times its length, and a bound in text bytes would let it past the store's limit.

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

// BoundStored cuts s on a character boundary so that its JSON encoding, quotes aside, takes at
// most n bytes as the transcript keeps it.
func BoundStored(s string, n int) string {
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

func storedRuneLen(r rune, size int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1:
		return 6
	}
	return size
}
