// Package cost says what model calls cost, in exact decimal money, and whether a budget allows
// the next one. It reads the amounts the API keeps as decimal strings (prices, limits, quotas,
// a run's cost), prices a call's tokens and formats the result back, never through a float:
// a float cannot hold 0.1, and a run's cost is a sum of thousands of such calls.
//
// Two grammars keep the arithmetic closed. A price (per million tokens) has at most 6 digits
// before the point and 6 after, so one token costs a whole number of 10^-12; an amount has at
// most 12 digits before the point and 12 after. Every call of fewer than 10^12 tokens then
// costs an amount, and so does every sum of such costs below 10^12: Format writes it and Parse
// reads it back exactly.
//
// The package does no I/O: callers hand it strings and token counts and get decimals back.
package cost
