// Package supervise runs a command as a child that this process stays the parent of until it exits,
// forwarding the signals that stop it. lbplane-supervise (the demo) and `lbctl envoy` run Envoy with it:
// Envoy 1.40 sets PR_SET_PDEATHSIG to SIGTERM, so it stops as soon as the thread that started it is gone.
package supervise

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

// Signals are the signals forwarded to the child.
var Signals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// Run starts cmd, calls started (if not nil) with the child's pid, forwards every signal of Signals to it
// until it exits, and returns its exit status: its exit code, or 128+signal when a signal ended it. An error
// means the child could not be started or waited for.
//
// PR_SET_PDEATHSIG fires when the parent *thread* exits, not the process: Run locks the calling goroutine to
// its thread until the child has exited. It also asks the kernel to send the child SIGTERM should this process
// be killed outright (SIGKILL), so that nothing is left behind without a parent.
func Run(cmd *exec.Cmd, started func(pid int)) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	// Subscribe before starting, so a signal that arrives during the start is not lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, Signals...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			if err != nil {
				return 1, err
			}
			return 0, nil
		}
	}
}
