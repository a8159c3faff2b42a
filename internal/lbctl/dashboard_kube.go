package lbctl

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// kubeDashboard is lbctl dashboard in Kubernetes mode: lbplane's API is only reachable through the
// port-forward lbctl opened, under a certificate for the Service's name, so lbctl serves the dashboard on
// http://127.0.0.1:PORT itself (as kubectl proxy does), verifying lbplane's certificate on the way, and
// keeps the port-forward open until Ctrl-C or --timeout. The hop from the browser is loopback and plain
// HTTP; browsers (and Go's cookie jar, which the test uses) count 127.0.0.1 as a secure origin, so the
// session cookie's Secure attribute needs no change on it.
func kubeDashboard(cmd *cobra.Command, g *globals, open bool, keep time.Duration) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	link, err := dashboardLink(cmd.Context(), g)
	if err != nil {
		return err
	}
	target, err := url.Parse(c.BaseURL)
	if err != nil {
		return err
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	if c.HTTP != nil {
		proxy.Transport = c.HTTP.Transport
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	local := "http://" + ln.Addr().String() + strings.TrimPrefix(link, strings.TrimSuffix(c.BaseURL, "/"))
	cl, _ := g.Connect()
	fmt.Fprintln(cmd.OutOrStdout(), local)
	fmt.Fprintf(cmd.ErrOrStderr(), "Serving lbplane's dashboard from pod %s/%s on %s; Ctrl-C to stop.\n", cl.LbplaneNamespace, cl.Pod, ln.Addr())
	if open {
		if err := exec.Command("xdg-open", local).Start(); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: --open: %v (open the link above yourself)\n", err)
		}
	}
	ctx := cmd.Context()
	if keep > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, keep)
		defer cancel()
	}
	<-ctx.Done()
	return nil
}
