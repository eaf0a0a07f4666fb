// Command localcluster runs a local Kubernetes control plane (kube-apiserver and etcd, no
// nodes) for the quickstart and the e2e suite. It writes a kubeconfig for people (user admin)
// and one for the operator (user baton-operator), both cluster admins, so that the admission
// webhook can tell them apart. With --webhooks it installs the webhook configurations found
// there, pointed at a local port with a certificate it generates, and writes the operator
// flags to serve them into webhook.flags. It runs until it is interrupted, then stops the
// control plane and removes its data.
//
// The binaries come from KUBEBUILDER_ASSETS; hack/envtest-assets.sh prints that directory.
package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

type users []string

func (u *users) String() string     { return strings.Join(*u, ",") }
func (u *users) Set(v string) error { *u = append(*u, v); return nil }

func main() {
	var (
		dir      string
		crds     string
		webhooks string
		extra    users
	)
	flag.StringVar(&dir, "dir", "", "Directory for the kubeconfig files (required).")
	flag.StringVar(&crds, "crds", "", "Directory of CustomResourceDefinitions to install once the API server is up.")
	flag.StringVar(&webhooks, "webhooks", "", "Directory of webhook configurations to install, served by a local operator.")
	flag.Var(&extra, "user", "Also write kubeconfig-<name> for a user with no groups beyond system:authenticated; "+
		"name[:group,group] adds groups. Repeatable.")
	flag.Parse()
	logf.SetLogger(zap.New(zap.UseDevMode(false)))
	if dir == "" {
		fail(fmt.Errorf("--dir is required"))
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fail(fmt.Errorf("KUBEBUILDER_ASSETS is not set; run hack/envtest-assets.sh to get the directory"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}

	env := &envtest.Environment{ErrorIfCRDPathMissing: crds != ""}
	if crds != "" {
		env.CRDDirectoryPaths = []string{crds}
	}
	if webhooks != "" {
		env.WebhookInstallOptions.Paths = []string{webhooks}
	}
	if _, err := env.Start(); err != nil {
		fail(fmt.Errorf("starting the control plane: %w", err))
	}
	stop := func(code int) {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
		os.Exit(code)
	}

	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err == nil {
		err = writeKubeconfig(admin, filepath.Join(dir, "kubeconfig"))
	}
	if err == nil {
		var operator *envtest.AuthenticatedUser
		if operator, err = env.AddUser(envtest.User{Name: "baton-operator", Groups: []string{"system:masters"}}, nil); err == nil {
			err = writeKubeconfig(operator, filepath.Join(dir, "kubeconfig-operator"))
		}
	}
	if err == nil && webhooks != "" {
		err = localOperator(env, dir)
	}
	for _, spec := range extra {
		if err != nil {
			break
		}
		name, groups, _ := strings.Cut(spec, ":")
		u := envtest.User{Name: name}
		if groups != "" {
			u.Groups = strings.Split(groups, ",")
		}
		var au *envtest.AuthenticatedUser
		if au, err = env.AddUser(u, nil); err == nil {
			err = writeKubeconfig(au, filepath.Join(dir, "kubeconfig-"+name))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop(1)
	}
	fmt.Printf("Control plane ready at %s; kubeconfig %s\n", env.Config.Host, filepath.Join(dir, "kubeconfig"))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	stop(0)
}

// localOperator writes the flags of an operator that runs on this machine (webhook.flags): the
// webhook's port and certificate, which the transcript API shares, and the transcript API's
// address; and it publishes that address, with the certificate's CA (servingCA), on the
// Service through which kubectl baton finds the transcript API.
func localOperator(env *envtest.Environment, dir string) error {
	w := env.WebhookInstallOptions
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	transcriptAddr := l.Addr().String()
	_ = l.Close()
	flags := fmt.Sprintf("--webhook-port=%d --webhook-cert-dir=%s --transcript-bind-address=%s\n", w.LocalServingPort, w.LocalServingCertDir, transcriptAddr)
	if err := os.WriteFile(filepath.Join(dir, "webhook.flags"), []byte(flags), 0o600); err != nil {
		return err
	}
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	ca, err := servingCA(ctx, c, &env.WebhookInstallOptions)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "baton-system"}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "baton-transcript", Namespace: "baton-system", Annotations: map[string]string{
			"agents.baton.dev/transcript-url": "https://" + transcriptAddr,
			"agents.baton.dev/transcript-ca":  base64.StdEncoding.EncodeToString(ca),
		}},
		// Outside the cluster: an ExternalName Service, which allocates nothing.
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: []corev1.ServicePort{{Name: "https", Port: 8444}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	// Everyone may find the transcript API; it answers each caller as their RBAC allows.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "baton-transcript-access", Namespace: "baton-system"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{"baton-transcript"}, Verbs: []string{"get"}}}}
	if err := c.Create(ctx, role); err != nil {
		return err
	}
	return c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "baton-transcript-access", Namespace: "baton-system"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}}})
}

func writeKubeconfig(u *envtest.AuthenticatedUser, path string) error {
	data, err := u.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig for %s: %w", path, err)
	}
	return os.WriteFile(path, data, 0o600)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
