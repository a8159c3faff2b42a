package lbctl

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/internal/envoysidecar"
)

func newEnvoySidecar() *cobra.Command {
	h := &envoysidecar.Sidecar{}
	id := &envoysidecar.Identity{}
	var once bool
	var listen string
	var linger time.Duration
	cmd := &cobra.Command{
		Use:   "envoy-sidecar",
		Short: "Serve an Envoy's liveness and drain it at shutdown, beside it in its pod, so that its image needs no shell",
		Long: `Run beside Envoy in its pod (the chart's envoy-sidecar container, from lbplane's image), speaking to
Envoy's admin on its Unix socket. GET /envoy/alive answers 200 while admin answers (Envoy's liveness probe);
GET /healthz is the sidecar's own. At SIGTERM, which the kubelet sends it at once while it runs Envoy's preStop
hook, it drains Envoy's listeners (admin /drain_listeners?graceful), lets Envoy accept for --drain-time, and
then waits at most --wait-time for Envoy's requests and TCP connections to end; Envoy's preStop hook is
GET /shutdown, which answers once that is over. GET /shutdown starts nothing by itself.

With --identity-url it also keeps Envoy's own xDS client certificate: it makes a key, which never leaves
the pod, and has lbplane sign it (POST /v1/identity), proving which pod it is with the pod's projected
service account token (--identity-token). lbplane names the node (the pod's name) and the proxy group (the
pod's lbplane.io/proxy-group label). The certificate goes into --identity-dir as the SDS files Envoy
watches; it is renewed at two thirds of its life, and replaced at once when lbplane refuses it (its group
revoked). --identity-once gets a good certificate and exits, waiting while lbplane cannot be reached (it
exits at once when lbplane refuses): the chart's init container, so that Envoy
starts with one.`,
		Example: `  lbctl envoy-sidecar --admin-socket /run/envoy/admin.sock --listen :19002 --drain-time 15s --wait-time 30s
  lbctl envoy-sidecar --identity-once --identity-url https://lbplane-xds.lbplane.svc:18001 \
    --identity-token /var/run/secrets/lbplane/token --identity-ca /etc/lbplane-ca/ca.crt --identity-dir /etc/envoy/tls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			id.Log = log
			if once || id.URL != "" {
				if id.URL == "" || id.TokenFile == "" || id.CAFile == "" || id.Dir == "" {
					return fmt.Errorf("--identity-url, --identity-token, --identity-ca and --identity-dir go together")
				}
			}
			if once {
				_, err := id.Wait(cmd.Context(), 5*time.Second)
				return err
			}
			if id.URL != "" {
				go id.Run(cmd.Context())
			}
			if h.AdminSocket == "" {
				return fmt.Errorf("--admin-socket: Envoy's admin socket is needed")
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			h.Log = log
			h.Log.Info("serving Envoy's liveness and shutdown", "address", lis.Addr().String(), "admin socket", h.AdminSocket)
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM)
			defer signal.Stop(sig)
			term := make(chan struct{})
			go func() {
				select {
				case <-sig:
					close(term)
				case <-cmd.Context().Done():
				}
			}()
			return h.Serve(cmd.Context(), lis, term, linger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&h.AdminSocket, "admin-socket", "/run/envoy/admin.sock", "Envoy's admin Unix socket")
	f.StringVar(&listen, "listen", ":19002", "address to serve /envoy/alive, /shutdown and /healthz on")
	f.DurationVar(&h.DrainTime, "drain-time", 15*time.Second, "how long Envoy keeps accepting once it drains (its --drain-time-s), answering each request with Connection: close")
	f.DurationVar(&h.WaitTime, "wait-time", 30*time.Second, "how long, after --drain-time, to wait at most for Envoy's requests and TCP connections to end")
	f.StringVar(&id.URL, "identity-url", "", "lbplane's push API (https://HOST:PORT): keep Envoy's own certificate, signed against the pod's service account token")
	f.StringVar(&id.TokenFile, "identity-token", "", "the pod's projected service account token (audience: lbplane's --envoy-identity-audience)")
	f.StringVar(&id.CAFile, "identity-ca", "", "lbplane's CA certificate (PEM; lbplane --ca-configmap publishes it)")
	f.StringVar(&id.ServerName, "identity-server-name", "", "the name lbplane's certificate must carry (default: --identity-url's host)")
	f.StringVar(&id.Dir, "identity-dir", "", "directory for Envoy's certificate, key and lbplane's CA (the SDS files Envoy's bootstrap reads)")
	f.DurationVar(&id.Check, "identity-check", 30*time.Second, "how often to ask lbplane whether the certificate is still good (it is renewed at two thirds of its life in any case)")
	f.BoolVar(&once, "identity-once", false, "get a good certificate into --identity-dir and exit (an init container)")
	f.DurationVar(&linger, "linger", 5*time.Second, "how long to keep serving after the drain, for Envoy's preStop hook to get its answer")
	return cmd
}
