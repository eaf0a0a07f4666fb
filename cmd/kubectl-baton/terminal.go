package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Most of what the plugin prints was written by a model, an agent or a tool: outputs, reasons,
// questions, tool arguments and results, feedback. Printed raw, such text can drive the user's
// terminal: an OSC 52 sequence writes their clipboard, CSI sequences recolour or move the
// cursor, a bare carriage return overwrites the line before it, a C1 control (0x9b is CSI on
// some terminals) does what the escape sequence would, and bidi overrides make text read other
// than it is. Every byte the plugin writes goes through terminalWriter, so no command can print
// such text raw; newlines and tabs pass, anything else of those is shown as \u followed by its
// code in hex, and bytes that are not UTF-8 as \x and theirs.
//
// The \u form is also JSON's own escape: a JSON document keeps its exact meaning through the
// writer (Go's encoder leaves DEL, C1 controls and bidi overrides raw in strings).

// terminalWriter writes to w with terminalSafe applied. Each Write is escaped on its own: every
// writer of the plugin's output (fmt, text/tabwriter, the JSON encoder) writes whole characters.
type terminalWriter struct{ w io.Writer }

func (t terminalWriter) Write(p []byte) (int, error) {
	s := string(p)
	if safe := terminalSafe(s); safe != s {
		if _, err := io.WriteString(t.w, safe); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return t.w.Write(p)
}

// terminalSafe is s with every character that can control a terminal, other than newline and
// tab, shown escaped.
func terminalSafe(s string) string {
	// A byte that is not UTF-8 reads as utf8.RuneError, as does U+FFFD itself, which is
	// harmless: the loop tells the two apart by size.
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || controlRune(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case controlRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// controlRune reports whether r can control a terminal or reorder what it shows: C0 controls
// other than newline and tab (ESC, CR, BEL, backspace...), DEL, C1 controls, and the bidi
// embeddings, overrides and isolates.
func controlRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
