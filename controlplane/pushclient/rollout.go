package pushclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// ApplyRollout is Apply with a rollout mode: "staged", "immediate", or "" for the policy's and the
// server's choice.
func (c *Client) ApplyRollout(ctx context.Context, docs []byte, dryRun bool, mode string) (*apiwire.ApplyResult, error) {
	q := url.Values{}
	if dryRun {
		q.Set("dryRun", "true")
	}
	if mode != "" {
		q.Set("rollout", mode)
	}
	path := "/v1/policies"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	res := &apiwire.ApplyResult{}
	return res, c.do(ctx, http.MethodPost, path, docs, res)
}

// Rollout returns where a policy's staged rollout stands.
func (c *Client) Rollout(ctx context.Context, namespace, name string) (*apiwire.RolloutResult, error) {
	out := &apiwire.RolloutResult{}
	return out, c.do(ctx, http.MethodGet, policyPath(namespace, name, "rollout"), nil, out)
}

// RolloutAction pauses, resumes, aborts or undoes a policy's rollout.
func (c *Client) RolloutAction(ctx context.Context, namespace, name, action string) (*apiwire.RolloutResult, error) {
	out := &apiwire.RolloutResult{}
	return out, c.do(ctx, http.MethodPost, policyPath(namespace, name, "rollout", action), nil, out)
}
