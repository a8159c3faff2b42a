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
GET /shutdown, which answers once that is over. GET /shutdown starts nothing by itself.`,
		Example: `  lbctl envoy-sidecar --admin-socket /run/envoy/admin.sock --listen :19002 --drain-time 15s --wait-time 30s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if h.AdminSocket == "" {
				return fmt.Errorf("--admin-socket: Envoy's admin socket is needed")
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			h.Log = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
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
	f.DurationVar(&linger, "linger", 5*time.Second, "how long to keep serving after the drain, for Envoy's preStop hook to get its answer")
	return cmd
}
