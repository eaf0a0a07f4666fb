package a2aagent

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"k8s.io/utils/clock"
)

const (
	// cardTTL is how long a card read is used before it is read again.
	cardTTL = 5 * time.Minute
	// maxCards bounds the cards kept: past it, the oldest is dropped.
	maxCards = 1024
)

// cards keeps the agent cards read, by base URL. A card that cannot be read is not kept: the
// next step reads it again.
type cards struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byURL map[string]keptCard
}

type keptCard struct {
	card *a2a.AgentCard
	read time.Time
}

func newCards(clk clock.PassiveClock) *cards {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &cards{clock: clk, byURL: map[string]keptCard{}}
}

// get is the card of the agent at baseURL, read through client when it is not kept or is
// older than cardTTL.
func (c *cards) get(ctx context.Context, client *http.Client, baseURL string) (*a2a.AgentCard, error) {
	now := c.clock.Now()
	c.mu.Lock()
	k, ok := c.byURL[baseURL]
	c.mu.Unlock()
	if ok && now.Sub(k.read) < cardTTL {
		return k.card, nil
	}
	card, err := (&agentcard.Resolver{Client: client, CardParser: parseCard}).Resolve(ctx, baseURL)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byURL) >= maxCards {
		c.dropOldest()
	}
	c.byURL[baseURL] = keptCard{card: card, read: now}
	return card, nil
}

func (c *cards) dropOldest() {
	var oldest string
	var at time.Time
	for u, k := range c.byURL {
		if oldest == "" || k.read.Before(at) {
			oldest, at = u, k.read
		}
	}
	delete(c.byURL, oldest)
}

// parseCard reads an A2A 1.0 card (it lists supportedInterfaces), or else a 0.3 card.
func parseCard(body []byte) (*a2a.AgentCard, error) {
	var probe struct {
		SupportedInterfaces json.RawMessage `json:"supportedInterfaces"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, err
	}
	if len(probe.SupportedInterfaces) > 0 && string(probe.SupportedInterfaces) != "null" {
		return agentcard.DefaultCardParser(body)
	}
	return a2av0.NewAgentCardParser()(body)
}
