// Package version reports the build's version: the release in the file VERSION beside this one (the one place
// it is written; the chart's appVersion and the image tag follow it, and a test holds them to it) and the VCS
// revision it was built from.
package version

import (
	_ "embed"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var release string

// Version is the release this source is, such as "0.1.0".
var Version = strings.TrimSpace(release)

// revision is set by builds that have no .git to read (the image build):
// -ldflags "-X github.com/lbplane/lbplane/version.revision=<commit>".
var revision string

// Revision is the VCS commit the binary was built from, with "-dirty" when the work tree had changes, or
// "unknown" (a build outside a checkout, go run, a test binary).
func Revision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// String is the version plus the short revision when one is known: "0.1.0 (8645d44a1b2c)".
func String() string {
	rev := Revision()
	if rev == "unknown" {
		return Version
	}
	short, dirty := strings.CutSuffix(rev, "-dirty")
	if len(short) > 12 {
		short = short[:12]
	}
	if dirty {
		short += "-dirty"
	}
	return Version + " (" + short + ")"
}
