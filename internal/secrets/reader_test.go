package secrets

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestSecretsAreReadOnlyInTheListedNamespaces(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := func(ns string) *corev1.Secret {
		s := &corev1.Secret{Data: map[string][]byte{"apiKey": []byte("sk-" + ns)}}
		s.Name, s.Namespace = "llm", ns
		s.Labels = map[string]string{v1alpha1.LabelAPIKey: "true"}
		return s
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret("team-a"), secret("team-b")).Build()

	cases := []struct {
		name       string
		namespaces []string
		namespace  string
		want       string // the key, or the error's words
	}{
		{name: "every namespace when none is listed", namespace: "team-b", want: "sk-team-b"},
		{name: "a listed namespace", namespaces: []string{"team-a"}, namespace: "team-a", want: "sk-team-a"},
		{name: "a namespace not listed", namespaces: []string{"team-a"}, namespace: "team-b",
			want: "the Secret llm in namespace team-b cannot be read: the operator reads Secrets only in the namespaces a cluster admin listed (--secret-namespaces)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewReader(reader, c.namespaces)
			key, err := r.SecretKey(t.Context(), c.namespace, "llm", "apiKey")
			if err != nil {
				key = err.Error()
			}
			if key != c.want {
				t.Errorf("SecretKey = %q, want %q", key, c.want)
			}
			data, err := r.SecretData(t.Context(), c.namespace, "llm")
			got := string(data["apiKey"])
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("SecretData = %q, want %q", got, c.want)
			}
		})
	}
}
