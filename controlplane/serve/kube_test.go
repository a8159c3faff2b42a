package serve

import (
	"slices"
	"strings"
	"testing"
)

// TestParsePorts reads --gateway-api-ports: ports and ranges, comma-separated, each checked as the backend
// address rules check theirs (reach.ParsePortRange).
func TestParsePorts(t *testing.T) {
	got, err := parsePorts("20000-20002, 20010")
	if err != nil || !slices.Equal(got, []int32{20000, 20001, 20002, 20010}) {
		t.Errorf("20000-20002, 20010: %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"0":            "want a port",
		"70000":        "want a port",
		"20010-20000":  "FROM <= TO",
		"x":            "want a port",
		"1-65535,1-2":  "too many ports",
		"20000,,20001": "want a port",
	} {
		if _, err := parsePorts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}
