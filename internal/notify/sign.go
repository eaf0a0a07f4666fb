package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a signed request's signature.
const SignatureHeader = "Baton-Signature"

// Sign is the Baton-Signature header of body sent at t with key: t=<unix seconds>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">.
func Sign(key []byte, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(key, ts, body)
}

func mac(key []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks a Baton-Signature header against body and key, and that it was made within
// tolerance of now: what a receiver does (docs/notifications.md shows it).
func Verify(key []byte, body []byte, header string, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("the %s header %q is not t=<unix>,v1=<hex>", SignatureHeader, header)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("the signature was made %s from now, more than %s", d, tolerance)
	}
	if !hmac.Equal([]byte(sig), []byte(mac(key, ts, body))) {
		return fmt.Errorf("the signature does not match the body")
	}
	return nil
}
