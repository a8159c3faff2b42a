package lbctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newDashboard(g *globals) *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Print (or open) a login link to lbplane's web dashboard",
		Long: `lbplane serves a web dashboard on its push API port at /dashboard/: every policy and its
conditions, a live chart of the spread over endpoints (refreshed every second), health and ejections as
they happen, each Envoy's sync state, and a policy's YAML with the Envoy resources it became.

This command asks lbplane for a one-time login code with the token (the read-only token is enough) and
prints a link holding that code, never the token: the code works once, within a minute, and the page
then trades it for a session cookie and drops it from the address bar. --open hands the link to the
desktop's browser (xdg-open). Without lbctl, open /dashboard/ and paste the token into the login form.`,
		Example: `  lbctl dashboard
  lbctl dashboard --open
  lbctl --server https://lbplane.example:18001 --token-file ~/.lbplane/token-readonly dashboard`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			link, err := dashboardLink(cmd.Context(), g)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), link)
			if open {
				if err := exec.Command("xdg-open", link).Start(); err != nil {
					return fmt.Errorf("--open: %w (open the link above yourself)", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link in the desktop's browser (xdg-open)")
	return cmd
}

// dashboardLink mints a one-time login code and returns the dashboard URL that holds it.
func dashboardLink(ctx context.Context, g *globals) (string, error) {
	c, err := g.client()
	if err != nil {
		return "", err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimSuffix(c.BaseURL, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/dashboard/login-code", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	var out struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(body, &out); err != nil || !strings.HasPrefix(out.Path, "/dashboard/") {
		return "", fmt.Errorf("%s: unexpected answer to a login code request (an lbplane without the dashboard?)", base)
	}
	return base + out.Path, nil
}
