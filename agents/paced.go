package agents

import (
	"context"
	"net/http"
)

// Calls on a shared endpoint. A step on a model endpoint that many runs share (a ModelEndpoint)
// is paced by the operator: its calls wait for the endpoint's capacity before they are made,
// and what the server says of its limits in each answer (429, Retry-After, x-ratelimit-*
// headers) is passed on to the pacer, which slows every step on that endpoint down. Such a
// call is not retried here after a 429: the pacer decides when it goes again.

// Answers is told of every HTTP answer to a paced call, before its body is read.
type Answers func(status int, header http.Header)

type answersKey struct{}

// Paced marks requests made with the context as paced calls, whose answers are told to
// answers, and which are not retried after a 429.
func Paced(ctx context.Context, answers Answers) context.Context {
	return context.WithValue(ctx, answersKey{}, answers)
}

// pacedAnswers is the Answers of a paced call's context, or nil.
func pacedAnswers(ctx context.Context) Answers {
	a, _ := ctx.Value(answersKey{}).(Answers)
	return a
}

// observeAnswers tells a paced call's answers to its pacer, each attempt's.
type observeAnswers struct{ next http.RoundTripper }

func (o observeAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if answers := pacedAnswers(req.Context()); answers != nil && err == nil {
		answers(resp.StatusCode, resp.Header)
	}
	return resp, err
}
