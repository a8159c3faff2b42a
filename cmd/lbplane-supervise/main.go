// Command lbplane-supervise runs one command as its child and stays its parent until it exits.
//
// The demo needs it for Envoy: Envoy 1.40 sets PR_SET_PDEATHSIG to SIGTERM, so it stops as soon as the
// process that started it exits. Started by `make run` (hack/demo.sh) in a session of its own, this
// supervisor outlives the script, and Envoy with it, until `make stop` sends it SIGTERM, which it forwards.
//
//	lbplane-supervise [--pid-file F] [--child-pid-file F] [--log F] -- command [args...]
//
// It exits with the child's exit status (128+signal when a signal ended it).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/lbplane/lbplane/internal/supervise"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("lbplane-supervise", flag.ContinueOnError)
	pidFile := fs.String("pid-file", "", "write the supervisor's pid here")
	childPidFile := fs.String("child-pid-file", "", "write the child's pid here")
	logFile := fs.String("log", "", "append the child's stdout and stderr here (default: inherit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: lbplane-supervise [--pid-file F] [--child-pid-file F] [--log F] -- command [args...]")
		return 2
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 1
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	// Every signal is forwarded: this supervisor runs in a session of its own, so none of them comes from a
	// terminal going away; they are sent to stop (or, SIGHUP, to signal) the child.
	code, err := supervise.Run(cmd, func(pid int) {
		for _, pf := range []struct {
			path string
			pid  int
		}{{*pidFile, os.Getpid()}, {*childPidFile, pid}} {
			if pf.path != "" {
				if err := os.WriteFile(pf.path, []byte(strconv.Itoa(pf.pid)+"\n"), 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "error:", err)
				}
			}
		}
	})
	removePid(*pidFile)
	removePid(*childPidFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	return code
}

func removePid(path string) {
	if path != "" {
		_ = os.Remove(path)
	}
}
