package grpcfleet

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// The fleet's answers (internal/grpcfleet/fleet): the line it starts with, and one per command.
type (
	// Started is the first line: the backends the fleet serves.
	Started struct {
		Backends []BackendInfo `json:"backends"`
	}
	// BackendInfo is one of the fleet's backends.
	BackendInfo struct {
		Name string `json:"name"`
		Port int    `json:"port"`
	}
	// Ready answers connect: how many clients answered a first call, and how long that took.
	Ready struct {
		Ready   int     `json:"ready"`
		Seconds float64 `json:"seconds"`
	}
	// Calls answers call: who answered each client's call, and the calls that failed.
	Calls struct {
		Answers    map[string]int `json:"answers"`
		Errors     int            `json:"errors"`
		FirstError string         `json:"firstError,omitempty"`
	}
	// Failure is the last line of a fleet that failed.
	Failure struct {
		Error string `json:"error"`
	}
)

// Process is a running fleet, driven over its stdin and stdout: a command a line, an answer a JSON line.
type Process struct {
	Cmd      *exec.Cmd
	Backends []BackendInfo
	in       io.WriteCloser
	out      *bufio.Scanner
}

// Start starts cmd, the fleet binary with its flags (its Env and Stderr as the caller sets them), and reads
// the backends it started.
func Start(cmd *exec.Cmd) (*Process, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	p.out.Buffer(nil, 1<<20)
	var started Started
	if err := p.answer(&started); err != nil {
		p.Close(10 * time.Second)
		return nil, err
	}
	p.Backends = started.Backends
	return p, nil
}

// Do sends command ("connect", "call") and reads its answer into v.
func (p *Process) Do(command string, v any) error {
	if _, err := io.WriteString(p.in, command+"\n"); err != nil {
		return err
	}
	return p.answer(v)
}

// answer reads the fleet's next line into v; a line with "error" is the fleet's failure.
func (p *Process) answer(v any) error {
	if !p.out.Scan() {
		return fmt.Errorf("the gRPC fleet ended: %v", p.out.Err())
	}
	var failed Failure
	if json.Unmarshal(p.out.Bytes(), &failed); failed.Error != "" {
		return errors.New("the gRPC fleet: " + failed.Error)
	}
	if err := json.Unmarshal(p.out.Bytes(), v); err != nil {
		return fmt.Errorf("the gRPC fleet said %q: %w", p.out.Text(), err)
	}
	return nil
}

// Close ends the fleet: its stdin closed, it closes its clients and exits; killed if it has not within wait.
func (p *Process) Close(wait time.Duration) error {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		p.Cmd.Process.Kill()
		return <-done
	}
}
