package live

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Secrets reads the API keys of live turns with the user's own credentials: from the
// environment first, BATON_SECRET_<NAME>_<KEY> (the Secret's name and key in upper case, each
// character that is not a letter or digit an underscore), then, when a cluster is at hand, from
// the Secret itself, read as the user: a user who may not read a Secret cannot use its key, and
// a Secret is used only when it is labelled agents.baton.dev/api-key=true, as the operator
// uses it.
type Secrets struct {
	// Reader reads Secrets as the user; nil when no cluster is at hand.
	Reader client.Reader
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
}

// EnvName is the environment variable that holds key of Secret name.
func EnvName(name, key string) string {
	upper := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z':
				return r - 'a' + 'A'
			case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
				return r
			}
			return '_'
		}, s)
	}
	return "BATON_SECRET_" + upper(name) + "_" + upper(key)
}

// SecretKey is the key, from the environment or the Secret.
func (s Secrets) SecretKey(ctx context.Context, namespace, name, key string) (string, error) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	env := EnvName(name, key)
	if v := getenv(env); v != "" {
		return v, nil
	}
	if s.Reader == nil {
		return "", &Stop{Err: fmt.Errorf("the API key is in key %s of Secret %s: set %s, or replay with a cluster at hand whose Secret you may read", key, name, env)}
	}
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return "", &Stop{Err: fmt.Errorf("reading the API key from Secret %s/%s as you (or set %s): %w", namespace, name, env, err)}
	}
	if secret.Labels[v1alpha1.LabelAPIKey] != "true" {
		return "", &Stop{Err: fmt.Errorf("the Secret %s/%s is not labelled %s=true, so no agent may send its keys (the operator would not either)", namespace, name, v1alpha1.LabelAPIKey)}
	}
	v, ok := secret.Data[key]
	if !ok {
		return "", &Stop{Err: fmt.Errorf("key %s is not in Secret %s/%s", key, namespace, name)}
	}
	return string(v), nil
}
