package main

import "testing"

func TestALinkNamesItsPage(t *testing.T) {
	for link, want := range map[string]string{
		"https://baton.example/runs/shop/refund-1001#gate": "/runs/shop/refund-1001#gate",
		"/sessions/shop/ticket-1":                          "/sessions/shop/ticket-1",
		"http://127.0.0.1:8080/inbox":                      "/inbox",
	} {
		if got, err := linkPage(link); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", link, got, err, want)
		}
	}
	for _, bad := range []string{"https://baton.example/", "/new", "::"} {
		if _, err := linkPage(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
