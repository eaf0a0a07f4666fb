package workflow

// Window keeps the newest context entries an agent is shown: at most maxMessages, and at most
// maxChars characters in all (Plan.ContextBudget). The newest entry is cut to fit when it alone
// is longer; older ones are kept whole or not at all. It may change the entries it is given.
func Window(entries []ContextEntry, maxMessages, maxChars int) []ContextEntry {
	if over := len(entries) - maxMessages; over > 0 {
		entries = entries[over:]
	}
	chars := 0
	first := len(entries)
	for i := len(entries) - 1; i >= 0; i-- {
		n := len([]rune(entries[i].Text))
		if chars+n > maxChars {
			if i == len(entries)-1 && maxChars > 0 {
				entries[i].Text = string([]rune(entries[i].Text)[:maxChars-1]) + "…"
				first = i
			}
			break
		}
		chars += n
		first = i
	}
	return entries[first:]
}
