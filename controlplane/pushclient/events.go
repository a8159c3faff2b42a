package pushclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// Events asks for the kept health events after seq (0: all), of one policy when name is set.
func (c *Client) Events(ctx context.Context, since uint64, namespace, name string) ([]apiwire.HealthEvent, error) {
	q := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if name != "" {
		q.Set("namespace", namespace)
		q.Set("name", name)
	}
	var out []apiwire.HealthEvent
	if err := c.do(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// History asks for a policy's health events and its backends' series over the last hour.
func (c *Client) History(ctx context.Context, namespace, name string) (*apiwire.HistoryResult, error) {
	var out apiwire.HistoryResult
	if err := c.do(ctx, http.MethodGet, policyPath(namespace, name, "history"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
