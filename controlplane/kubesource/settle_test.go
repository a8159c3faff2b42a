package kubesource_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// waitSettled waits until there are n policies, every one satisfies ok, and two lists a second apart show
// no write (the status writer has nothing left to write); it returns the list's resource version.
func waitSettled(ctx context.Context, t *testing.T, cl client.Client, n int, deadline time.Time, ok func(*v1alpha1.LoadBalancerPolicy) bool, what string) string {
	t.Helper()
	last := ""
	for stable := 0; stable < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(time.Second)
		var list v1alpha1.LoadBalancerPolicyList
		if err := cl.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		all := len(list.Items) == n
		for i := range list.Items {
			all = all && ok(&list.Items[i])
		}
		if all && list.ResourceVersion == last {
			stable++
		} else {
			stable = 0
		}
		last = list.ResourceVersion
	}
	return last
}
