package lbctl

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/version"
)

// versions is what lbctl version prints, as kubectl version -o json does: the client's and the server's.
type versions struct {
	Client apiwire.Version  `json:"clientVersion"`
	Server *apiwire.Version `json:"serverVersion,omitempty"`
	// ServerError says why the server's version is missing.
	ServerError string `json:"serverError,omitempty"`
}

func newVersion(g *globals) *cobra.Command {
	var clientOnly bool
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print lbctl's version and the version of the lbplane it talks to",
		Long: `Print lbctl's version and, unless --client, the version of the lbplane serving the push API (in
Kubernetes mode, of the lbplane pod the port-forward reaches). An unreachable server is reported, and lbctl
version still prints its own version; the exit status is then 1.`,
		Example: `  lbctl version
  lbctl version --client
  lbctl version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			v := versions{Client: apiwire.Version{Version: version.String(), GoVersion: runtime.Version()}}
			var serverErr error
			if !clientOnly {
				v.Server, serverErr = serverVersion(cmd.Context(), g)
				if serverErr != nil {
					v.ServerError = serverErr.Error()
				}
			}
			err := out.Print(cmd.OutOrStdout(), printable{Object: v, Text: func(w io.Writer, _ bool) error {
				fmt.Fprintf(w, "Client Version: %s\n", v.Client.Version)
				if v.Server != nil {
					fmt.Fprintf(w, "Server Version: %s\n", v.Server.Version)
				}
				return nil
			}})
			if err != nil {
				return err
			}
			if serverErr != nil {
				return fmt.Errorf("server version: %w", serverErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only lbctl's version; ask no server")
	out = addOutputFlags(cmd, "")
	return cmd
}

func serverVersion(ctx context.Context, g *globals) (*apiwire.Version, error) {
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Version(ctx)
}
