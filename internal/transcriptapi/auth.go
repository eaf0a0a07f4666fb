package transcriptapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Auth authenticates callers as the API server does, and authorizes them with the API server.
type Auth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	log   logr.Logger
	// audiences, when set, are the only audiences a bearer token is accepted for.
	audiences authenticator.Audiences
}

// ForAudiences is the same Auth, accepting only bearer tokens issued for one of audiences: its
// TokenReviews name them, and the API server refuses a token made for another audience (its
// own, which kubectl's and every ServiceAccount's default token carry). A token another
// service was given cannot then be played to this one. Client certificates are accepted as
// before: whoever presents one proves they hold its key, to this server alone.
func (a *Auth) ForAudiences(audiences ...string) *Auth {
	c := *a
	c.audiences = audiences
	return &c
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// NewAuth delegates authentication and authorization to the API server: bearer tokens are
// checked with TokenReviews, client certificates against the cluster's client CA (the
// client-ca-file of kube-system/extension-apiserver-authentication, kept current), and each
// request with a SubjectAccessReview. Results are cached briefly. The CA's watch runs until ctx
// ends.
func NewAuth(ctx context.Context, kube kubernetes.Interface, log logr.Logger) (*Auth, error) {
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	clientCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca",
		"kube-system", "extension-apiserver-authentication", "client-ca-file", kube)
	if err != nil {
		return nil, err
	}
	if err := clientCA.RunOnce(ctx); err != nil {
		// Tokens still work; certificates are refused until the CA can be read.
		log.Error(err, "Reading the cluster's client CA; client certificates are refused until it can be read")
	}
	go clientCA.Run(ctx, 1)
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                           30 * time.Second,
		TokenAccessReviewClient:            kube.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                backoff,
		ClientCertificateCAContentProvider: clientCA,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the transcript API's authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              5 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the transcript API's authorizer: %w", err)
	}
	return &Auth{authn: authn, authz: authz, log: log}, nil
}

// Check says whether the caller may read the run's transcript: whether they may get the
// AgentRun. It returns 200, or the status to answer and why.
func (a *Auth) Check(r *http.Request, namespace, name string) (int, string) {
	_, status, msg := a.Authorize(r, Access{Verb: "get", Resource: "agentruns", Namespace: namespace, Name: name})
	return status, msg
}

// CheckRun says whether the caller may read this run's transcript: get on the AgentRun, and for
// a turn of a session, get on the AgentSession too, whose history the turn's transcript holds.
func (a *Auth) CheckRun(r *http.Request, run *v1alpha1.AgentRun) (int, string) {
	if status, msg := a.Check(r, run.Namespace, run.Name); status != http.StatusOK || run.Spec.Session == nil {
		return status, msg
	}
	_, status, msg := a.Authorize(r, Access{Verb: "get", Resource: "agentsessions", Namespace: run.Namespace, Name: run.Spec.Session.Name})
	return status, msg
}

// Access is what a request asks to do, as RBAC names it, on Baton's API group.
type Access struct {
	Verb, Resource, Namespace, Name string
}

// Authenticate is the caller, or the status to answer and why.
func (a *Auth) Authenticate(r *http.Request) (user.Info, int, string) {
	// The bearer-token authenticator takes the Authorization header off the request it checks:
	// a stream checks its request again at every re-authorization, so it checks a copy.
	r = r.Clone(r.Context())
	present := "present a bearer token or a client certificate, as for the API server"
	if len(a.audiences) > 0 {
		r = r.WithContext(authenticator.WithAudiences(r.Context(), a.audiences))
		present = fmt.Sprintf("present a bearer token made for audience %s (kubectl create token SERVICEACCOUNT --audience %s) or a client certificate",
			strings.Join(a.audiences, " or "), a.audiences[0])
	}
	res, ok, err := a.authn.AuthenticateRequest(r)
	switch {
	case err != nil:
		a.log.V(4).Info("Authentication failed", "error", err.Error())
		return nil, http.StatusUnauthorized, "Unauthorized: " + present
	case !ok:
		return nil, http.StatusUnauthorized, "Unauthorized: " + present
	}
	return res.User, http.StatusOK, ""
}

// Allowed says whether u may do what access names: 200, or the status to answer and why.
func (a *Auth) Allowed(ctx context.Context, u user.Info, access Access) (int, string) {
	attrs := authorizer.AttributesRecord{
		User: u, Verb: access.Verb, Namespace: access.Namespace, APIGroup: v1alpha1.GroupVersion.Group,
		APIVersion: v1alpha1.GroupVersion.Version, Resource: access.Resource, Name: access.Name, ResourceRequest: true,
	}
	decision, reason, err := a.authz.Authorize(ctx, attrs)
	if err != nil {
		a.log.Error(err, "Authorizing a request", "user", u.GetName())
		return http.StatusInternalServerError, "authorization failed: " + err.Error()
	}
	if decision != authorizer.DecisionAllow {
		what := fmt.Sprintf("%s.%s", access.Resource, v1alpha1.GroupVersion.Group)
		if access.Name != "" {
			what += fmt.Sprintf(" %q", access.Name)
		}
		msg := fmt.Sprintf(`%s is forbidden: User %q cannot %s resource %q in API group %q in the namespace %q`,
			what, u.GetName(), access.Verb, access.Resource, v1alpha1.GroupVersion.Group, access.Namespace)
		if reason != "" {
			msg += ": " + reason
		}
		return http.StatusForbidden, msg
	}
	return http.StatusOK, ""
}

// Authorize authenticates the caller and checks they may do what access names: the caller, or
// the status to answer and why.
func (a *Auth) Authorize(r *http.Request, access Access) (user.Info, int, string) {
	u, status, msg := a.Authenticate(r)
	if status != http.StatusOK {
		return nil, status, msg
	}
	if status, msg := a.Allowed(r.Context(), u, access); status != http.StatusOK {
		return nil, status, msg
	}
	return u, http.StatusOK, ""
}
