package transcriptapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TestMain quiets the log of the API server's libraries the Auth is built on: every test
// starts and stops their client CA controller.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// kubeAPI stands for the API server the transcript API delegates to, over HTTP: it answers
// TokenReviews for the tokens it issued, SubjectAccessReviews as RBAC would (a user, or a
// group's members, "group:readers", may do each verb listed on the AgentRuns of namespace
// team-a, or on one run: "get r"), and serves the cluster's client CA in kube-system.
type kubeAPI struct {
	tokens map[string]authenticationv1.UserInfo
	ca     *testCA
	// client reaches it, once started.
	client kubernetes.Interface

	mu   sync.Mutex
	rbac map[string][]string
	// reviews counts the SubjectAccessReviews asked.
	reviews int
}

// start serves the API server until the test ends, and returns the transcript API's Auth on
// it, as the operator makes it.
func (k *kubeAPI) start(t *testing.T) *Auth {
	t.Helper()
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	k.client = kube
	auth, err := NewAuth(t.Context(), kube, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

// uncached is the operator's authorizer on the API server, without the seconds it keeps each
// answer: it asks every time.
func (k *kubeAPI) uncached(t *testing.T) authorizer.Authorizer {
	t.Helper()
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{SubjectAccessReviewClient: k.client.AuthorizationV1(),
		AllowCacheTTL: time.Nanosecond, DenyCacheTTL: time.Nanosecond, WebhookRetryBackoff: &wait.Backoff{Duration: time.Millisecond, Steps: 1}}.New()
	if err != nil {
		t.Fatal(err)
	}
	return authz
}

func (k *kubeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		review := &authenticationv1.TokenReview{}
		if !readReview(w, r, review) {
			return
		}
		if u, ok := k.tokens[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u, Audiences: review.Spec.Audiences}
		}
		answer(w, review)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		review := &authorizationv1.SubjectAccessReview{}
		if !readReview(w, r, review) {
			return
		}
		review.Status.Allowed = k.allows(review.Spec)
		answer(w, review)
	case r.URL.Path == "/api/v1/namespaces/kube-system/configmaps":
		k.clientCA(w, r)
	default:
		http.NotFound(w, r)
	}
}

// allows answers a SubjectAccessReview as RBAC would.
func (k *kubeAPI) allows(spec authorizationv1.SubjectAccessReviewSpec) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reviews++
	attrs := spec.ResourceAttributes
	if attrs == nil || attrs.Group != v1alpha1.GroupVersion.Group || attrs.Namespace != team ||
		(attrs.Resource != "agentruns" && attrs.Resource != "agentsessions") {
		return false
	}
	who := []string{spec.User}
	for _, g := range spec.Groups {
		who = append(who, "group:"+g)
	}
	for _, w := range who {
		for _, grant := range k.rbac[w] {
			// "get" and "get r" are on agentruns; "get agentsessions/chat" on a session.
			verb, name, named := strings.Cut(grant, " ")
			resource := "agentruns"
			if r, n, ok := strings.Cut(name, "/"); named && ok {
				resource, name = r, n
			}
			if verb == attrs.Verb && resource == attrs.Resource && (!named || name == attrs.Name) {
				return true
			}
		}
	}
	return false
}

// revoke takes away everything the subject may do.
func (k *kubeAPI) revoke(who string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.rbac, who)
}

// clientCA serves the ConfigMap that holds the cluster's client CA, to the list and the watch
// the operator keeps it current with; a watch stays open until the operator stops it.
func (k *kubeAPI) clientCA(w http.ResponseWriter, r *http.Request) {
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: "kube-system", ResourceVersion: "1"}}
	if k.ca != nil {
		cm.Data = map[string]string{"client-ca-file": string(k.ca.pem)}
	}
	if r.URL.Query().Get("watch") != "true" {
		answer(w, &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
			ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.ConfigMap{cm}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		end := corev1.ConfigMap{TypeMeta: cm.TypeMeta, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1",
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": cm})
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": end})
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func readReview(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// testCA is a certificate authority for client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue is the CA's client certificate for a user in groups, as kubeadm or a CSR makes them,
// with its key.
func (ca *testCA) issue(t *testing.T, user string, groups ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}
