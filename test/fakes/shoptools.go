package fakes

import (
	"context"
	"sync/atomic"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/tools"
)

// ShopTools are a shop's tool servers, handed out as a toolbox's clients are: the server named
// "refund" has one tool, refund, that counts the refunds it makes; every other server has one
// tool, fetch, whose every page says Page (an injected instruction, an email address).
type ShopTools struct {
	Page    string
	refunds atomic.Int32
}

// Refunds is how many refunds were made.
func (s *ShopTools) Refunds() int32 { return s.refunds.Load() }

// Client is the server's client.
func (s *ShopTools) Client(_ context.Context, _ string, server v1alpha1.ToolServer, _ map[string]string) (tools.Client, error) {
	return shopTool{s: s, refund: server.Name == "refund"}, nil
}

type shopTool struct {
	s      *ShopTools
	refund bool
}

func (c shopTool) Tools(context.Context) ([]tools.Tool, error) {
	if c.refund {
		return []tools.Tool{{Name: "refund"}}, nil
	}
	return []tools.Tool{{Name: "fetch"}}, nil
}

func (c shopTool) Call(context.Context, tools.Call) (tools.Result, error) {
	if c.refund {
		c.s.refunds.Add(1)
		return tools.Result{Content: "refunded"}, nil
	}
	return tools.Result{Content: c.s.Page}, nil
}
