// Package version reports the build's version.
package version

import "runtime/debug"

// Version is set at build time with -ldflags "-X github.com/lbplane/lbplane/internal/version.Version=...".
var Version = "dev"

// String is the version plus the VCS revision when the build recorded one.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
