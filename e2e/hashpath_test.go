package e2e

import (
	"fmt"
	"testing"
)

// TestHashOnPathAndHost: with path as the hash key, every request for one path lands on one endpoint,
// whatever its query string, and 300 paths spread over 3 endpoints with at least 20 % each; with host, every
// request for one Host lands on one endpoint.
func TestHashOnPathAndHost(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "p1", "p2", "p3")
	for _, tc := range []struct {
		name, key string
		// request returns where request r for key i went.
		request func(c *Client, url string, i, r int) (string, error)
	}{
		{"path", "{path: {}}", func(c *Client, url string, i, r int) (string, error) {
			return requestVia(c, fmt.Sprintf("%s/item/%d?rev=%d", url, i, r), nil)
		}},
		{"host", "{host: {}}", func(c *Client, url string, i, r int) (string, error) {
			return requestVia(c, fmt.Sprintf("%s/page/%d", url, r), map[string]string{"Host": fmt.Sprintf("site-%d.example", i)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
			e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
			startEnvoy(t, e.L, "envoy-"+tc.name, true)
			push(t, e.L, policy(t, hashPolicy, map[string]any{"Port": e.Port, "B": bs, "Algorithm": "Maglev", "Key": tc.key}))
			waitServing(t, e.URL, "p1", "p2", "p3")
			c := newClient(true)
			const keys, rounds = 300, 3
			got := map[int]string{}
			moved := 0
			for r := 0; r < rounds; r++ {
				for i := 0; i < keys; i++ {
					b, err := tc.request(c, e.URL, i, r)
					if err != nil {
						t.Fatal(err)
					}
					if prev, ok := got[i]; ok && prev != b {
						moved++
					}
					got[i] = b
				}
			}
			if moved > 0 {
				t.Errorf("%d of %d requests left their %s's endpoint", moved, keys*(rounds-1), tc.name)
			}
			spread := spreadOf(got)
			for _, b := range []string{"p1", "p2", "p3"} {
				if spread[b] < keys/5 {
					t.Errorf("%s got %d of %d %ss; want at least 20 %%: %v", b, spread[b], keys, tc.name, spread)
				}
			}
			t.Logf("%d %ss x %d requests, each always on one endpoint; %ss per endpoint: %v", keys, tc.name, rounds, tc.name, spread)
		})
	}
}
