package transcriptapi

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// tokenReviews stands for the API server's TokenReviews: a token is accepted for the audiences
// it was made for, or for any when the review names none.
type tokenReviews map[string][]string

func (tr tokenReviews) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	made, ok := tr[token]
	if !ok {
		return nil, false, nil
	}
	if want, limited := authenticator.AudiencesFrom(r.Context()); limited && !slices.ContainsFunc(made, func(a string) bool { return slices.Contains(want, a) }) {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:ops:" + token}}, true, nil
}

// An Auth for audiences accepts only tokens made for one of them; the Auth it came from goes
// on accepting tokens of any audience, as the API server does.
func TestAnAuthForAudiencesAcceptsOnlyTokensMadeForThem(t *testing.T) {
	all := &Auth{authn: tokenReviews{"clerk": {"https://kubernetes.default.svc"}, "agent": {"agents.baton.dev"}}, log: logr.Discard()}
	baton := all.ForAudiences("agents.baton.dev")
	cases := map[string]struct {
		auth  *Auth
		token string
		want  int
	}{
		"the API server's token, anywhere":       {all, "clerk", http.StatusOK},
		"the API server's token, for Baton only": {baton, "clerk", http.StatusUnauthorized},
		"a token made for Baton, for Baton only": {baton, "agent", http.StatusOK},
		"an unknown token, for Baton only":       {baton, "nobody", http.StatusUnauthorized},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			_, status, msg := tc.auth.Authenticate(r)
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, msg, tc.want)
			}
			if status != http.StatusOK && tc.auth == baton && !strings.Contains(msg, "--audience agents.baton.dev") {
				t.Errorf("the refusal does not say how to get a token: %s", msg)
			}
		})
	}
}
