package cost

import (
	"fmt"
	"math"

	"github.com/shopspring/decimal"
)

// Price is one model's price per million tokens, in its table's currency.
type Price struct {
	// Input is the price of a prompt token not served from the provider's cache.
	Input decimal.Decimal
	// CachedInput is the price of a prompt token served from the provider's cache.
	CachedInput decimal.Decimal
	// Output is the price of a completion token (reasoning tokens included, as providers count
	// them).
	Output decimal.Decimal
}

// NewPrice reads a price from the API's strings, each as ParsePrice reads it. An empty
// cachedInput means the provider has no cheaper price for cached tokens: they cost the input
// price. Errors name the field: "output: ...".
func NewPrice(input, cachedInput, output string) (Price, error) {
	var p Price
	var err error
	if p.Input, err = ParsePrice(input); err != nil {
		return Price{}, fmt.Errorf("input: %w", err)
	}
	p.CachedInput = p.Input
	if cachedInput != "" {
		if p.CachedInput, err = ParsePrice(cachedInput); err != nil {
			return Price{}, fmt.Errorf("cachedInput: %w", err)
		}
	}
	if p.Output, err = ParsePrice(output); err != nil {
		return Price{}, fmt.Errorf("output: %w", err)
	}
	return p, nil
}

// Usage is a call's tokens as providers report them.
type Usage struct {
	// Input is every prompt token, the cached ones included, as OpenAI counts them. Anthropic
	// counts them apart: its input, cache-read and cache-creation tokens added up are this (a
	// cache write is then priced as input, a little below what Anthropic charges for it).
	Input int64
	// CachedInput is the part of Input served from the provider's cache.
	CachedInput int64
	// Output is the completion's tokens.
	Output int64
}

// Reported is the usage of a call whose provider reported tokens in all, inputTokens of them the
// prompt and cachedInputTokens of those cached.
func Reported(tokens, inputTokens, cachedInputTokens int64) Usage {
	input := max(inputTokens, 0)
	return Usage{Input: input, CachedInput: cachedInputTokens, Output: max(tokens-input, 0)}
}

// Add is the usage of two calls together.
func (u Usage) Add(v Usage) Usage {
	return Usage{Input: u.Input + v.Input, CachedInput: u.CachedInput + v.CachedInput, Output: u.Output + v.Output}
}

// perMillion turns a price per million tokens times a count of tokens into money: exactly, by
// moving the point, where a division would round.
const perMillion = -6

// Of is what a call with usage u costs, exactly. Counts a provider should not report are read
// the nearest way that makes sense: a negative count as 0, and CachedInput as at most Input.
func (p Price) Of(u Usage) decimal.Decimal {
	in := max(u.Input, 0)
	cached := min(max(u.CachedInput, 0), in)
	out := max(u.Output, 0)
	return p.Input.Mul(decimal.NewFromInt(in - cached)).
		Add(p.CachedInput.Mul(decimal.NewFromInt(cached))).
		Add(p.Output.Mul(decimal.NewFromInt(out))).
		Shift(perMillion)
}

// Worst is the most a call can cost before it is made: every one of inputTokens at the higher
// of the input prices (nothing may come from the cache), and every one of maxOutputTokens, the
// completion's cap. Negative counts are read as 0.
func (p Price) Worst(inputTokens, maxOutputTokens int64) decimal.Decimal {
	return decimal.Max(p.Input, p.CachedInput).Mul(decimal.NewFromInt(max(inputTokens, 0))).
		Add(p.Output.Mul(decimal.NewFromInt(max(maxOutputTokens, 0)))).
		Shift(perMillion)
}

// The rule of EstimateTokens.
const (
	// bytesPerToken: prose and code in the common tokenizers take 3 to 5 bytes a token over a
	// whole text and never under 2.3 in any 4 KiB of it (see EstimateTokens).
	bytesPerToken = 2
	// tokensPerMessage: a chat message's framing, as OpenAI's chat format counts it (three
	// tokens around the content, one for the role).
	tokensPerMessage = 4
	// tokensPerReply: the tokens that open the assistant's reply.
	tokensPerReply = 3
)

// EstimateTokens is an over-estimate of the prompt tokens of a call of the given bytes of
// UTF-8 text in the given number of messages, for reserving capacity and budget before the
// call: one token per 2 bytes, rounded up, plus 4 tokens a message and 3 for the reply's start.
// Negative arguments count as 0; the result saturates at math.MaxInt64.
//
// Byte-level BPE tokenizers (OpenAI's o200k and cl100k, Anthropic's published one) make common
// text far shorter than its bytes. Measured over this repository's docs, Go source and YAML and
// a Japanese book, whole texts took 3.0 to 4.9 bytes a token in the three, and their densest
// 4 KiB chunk 2.37 (Japanese in cl100k), so the rule over-estimates every such chunk by at least
// 18%, and whole texts by 1.5 to 2.5 times. One token per 3 bytes, the usual rule of thumb,
// under-estimated Go source and Japanese in some of them. Text that tokenizers did not learn
// (random hex, base64, letters and punctuation, CJK or emoji) took 1.3 to 2 bytes a token, and
// this rule under-estimates it by up to 37%: only one token per byte bounds every text, and it
// would reserve four times what prose needs. What a run is charged is the provider's reported
// usage, priced by Of.
func EstimateTokens(bytes int64, messages int) int64 {
	bytes, msgs := max(bytes, 0), max(int64(messages), 0)
	tokens := bytes / bytesPerToken
	if bytes%bytesPerToken != 0 {
		tokens++
	}
	framing := int64(math.MaxInt64)
	if msgs < (math.MaxInt64-tokensPerReply)/tokensPerMessage {
		framing = msgs*tokensPerMessage + tokensPerReply
	}
	if tokens > math.MaxInt64-framing {
		return math.MaxInt64
	}
	return tokens + framing
}
