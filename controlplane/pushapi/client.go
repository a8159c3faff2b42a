package pushapi

import "github.com/lbplane/lbplane/controlplane/pushclient"

// The client lives in pushclient so that lbctl links none of the server; these names stay for the server's
// tests and the e2e harness, which use both.
type (
	Client   = pushclient.Client
	APIError = pushclient.APIError
)
