package kubepki

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/objkey"
)

// The extra fields the API server puts in a TokenReview of a pod-bound service account token: the pod it is
// bound to, as the API server knows it (not as the pod says).
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// ProxyGroupLabel is the Envoy pod label that names its proxy group; read from the Pod object, never from the
// request.
const ProxyGroupLabel = "lbplane.io/proxy-group"

// PodIdentity says which Envoy a Kubernetes pod is, from its projected service account token: the token is
// reviewed by the API server (TokenReview, with lbplane's audience), which names the pod it is bound to; the
// pod must run as one of the Envoy service accounts, still exist with that uid, and carry the proxy group
// label. The node id is the pod's name: a pod cannot choose it.
type PodIdentity struct {
	Reviews authnv1client.TokenReviewsGetter
	Pods    corev1client.PodsGetter
	// Audience the token must be issued for (the chart's projected volume asks for it).
	Audience string
	// ServiceAccounts are the Envoy pods' service accounts, as namespace/name.
	ServiceAccounts []string
}

// PodIdentityError is a refusal the caller may show: the token, the pod or its service account is not an
// Envoy's. Other errors are the API server's.
type PodIdentityError struct{ Reason string }

func (e *PodIdentityError) Error() string { return e.Reason }

func refuse(format string, args ...any) error {
	return &PodIdentityError{Reason: fmt.Sprintf(format, args...)}
}

// Pod is an Envoy pod as the API server vouches for it.
type Pod struct {
	Namespace, Name, UID, ProxyGroup string
}

// Identify reviews token and returns the pod it is bound to.
func (p *PodIdentity) Identify(ctx context.Context, token string) (Pod, error) {
	if token == "" {
		return Pod{}, refuse("no bearer token: send the pod's projected service account token (audience %s)", p.Audience)
	}
	tr, err := p.Reviews.TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
		Token: token, Audiences: []string{p.Audience}}}, metav1.CreateOptions{})
	if err != nil {
		return Pod{}, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		// The API server's reason can say why (expired, wrong audience); it names no secret.
		return Pod{}, refuse("the token is not valid for audience %s: %s", p.Audience, st.Error)
	}
	if !slices.Contains(st.Audiences, p.Audience) {
		return Pod{}, refuse("the token is not issued for audience %s", p.Audience)
	}
	ns, sa, ok := serviceAccountOf(st.User.Username)
	if !ok {
		return Pod{}, refuse("the token is not a service account's (%s)", st.User.Username)
	}
	if !slices.Contains(p.ServiceAccounts, objkey.Key{Namespace: ns, Name: sa}.String()) {
		return Pod{}, refuse("service account %s is not an Envoy service account", objkey.Key{Namespace: ns, Name: sa})
	}
	name, uid := one(st.User.Extra[extraPodName]), one(st.User.Extra[extraPodUID])
	if name == "" || uid == "" {
		return Pod{}, refuse("the token is not bound to a pod: use a projected service account token")
	}
	pod, err := p.Pods.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Pod{}, refuse("pod %s/%s does not exist", ns, name)
	}
	if err != nil {
		return Pod{}, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	if string(pod.UID) != uid {
		return Pod{}, refuse("pod %s/%s is not the pod the token is bound to (uid)", ns, name)
	}
	if pod.DeletionTimestamp != nil {
		return Pod{}, refuse("pod %s/%s is being deleted", ns, name)
	}
	if pod.Spec.ServiceAccountName != sa {
		return Pod{}, refuse("pod %s/%s does not run as service account %s", ns, name, sa)
	}
	group := pod.Labels[ProxyGroupLabel]
	if group == "" {
		return Pod{}, refuse("pod %s/%s has no %s label", ns, name, ProxyGroupLabel)
	}
	return Pod{Namespace: ns, Name: name, UID: uid, ProxyGroup: group}, nil
}

func one(v authnv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}

// serviceAccountOf splits system:serviceaccount:<namespace>:<name>.
func serviceAccountOf(user string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != ""
}

// IsRefusal tells whether err is a refusal of the caller (not a failure of the API server).
func IsRefusal(err error) bool {
	var r *PodIdentityError
	return errors.As(err, &r)
}
