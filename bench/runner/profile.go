package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// pprofArgs are the lbplane flags that serve net/http/pprof on a loopback port, for the rows whose missed
// targets the report explains with a profile.
func pprofArgs(port int) []string {
	return []string{"--metrics-address", fmt.Sprintf("127.0.0.1:%d", port), "--pprof"}
}

// profile fetches one of lbplane's pprof profiles (a CPU profile of seconds, or the heap when seconds is 0)
// into dir/name.pprof and writes `go tool pprof -top` of it beside it (name.top.txt); it returns the top's
// first lines for the log. Failures are reported, not fatal: a profile explains a row, it does not make it.
func profile(port, seconds int, dir, name string) string {
	return profileAt(fmt.Sprintf("127.0.0.1:%d", port), seconds, dir, name)
}

// profileAt is profile of the lbplane whose pprof is at addr (host:port).
func profileAt(addr string, seconds int, dir, name string) string {
	url := fmt.Sprintf("http://%s/debug/pprof/heap", addr)
	if seconds > 0 {
		url = fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds)
	}
	client := &http.Client{Timeout: time.Duration(seconds+60) * time.Second, Transport: &http.Transport{Proxy: nil}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "profile " + name + ": " + err.Error()
	}
	// lbplane's pprof needs the admin token (serveArgs' --token).
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := client.Do(req)
	if err != nil {
		return "profile " + name + ": " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return fmt.Sprintf("profile %s: %s %v", name, resp.Status, err)
	}
	path := filepath.Join(dir, name+".pprof")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err.Error()
	}
	args := []string{"tool", "pprof", "-top", "-nodecount", "25"}
	if seconds == 0 {
		args = append(args, "-sample_index", "inuse_space")
	}
	var out bytes.Buffer
	cmd := exec.Command("go", append(args, path)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Run()
	os.WriteFile(filepath.Join(dir, name+".top.txt"), out.Bytes(), 0o644)
	lines := strings.Split(out.String(), "\n")
	return strings.Join(lines[:min(len(lines), 16)], "\n")
}
