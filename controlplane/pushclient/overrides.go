package pushclient

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// SetEndpointState sets an endpoint of a policy Draining or under Maintenance, or Ready (admin token).
func (c *Client) SetEndpointState(ctx context.Context, namespace, name string, req apiwire.EndpointStateRequest) (*apiwire.EndpointStateResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	out := &apiwire.EndpointStateResult{}
	return out, c.do(ctx, http.MethodPost, policyPath(namespace, name, "endpoint-state"), body, out)
}

// EndpointOverrides lists every policy's endpoint overrides in force.
func (c *Client) EndpointOverrides(ctx context.Context) ([]apiwire.PolicyOverrides, error) {
	var out []apiwire.PolicyOverrides
	return out, c.do(ctx, http.MethodGet, "/v1/endpoint-overrides", nil, &out)
}
