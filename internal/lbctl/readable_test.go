package lbctl

import (
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// explain's IR reads as a person writes it: durations as "5s", keys in lowerCamelCase whether or not the
// type names them for JSON.
func TestReadableDurationsAndKeys(t *testing.T) {
	type limits struct {
		MaxConnections uint32
		IPFamily       string
		Idle           time.Duration `json:"idleTimeout,omitempty"`
		Unset          time.Duration `json:"unset,omitempty"`
		Backoff        *time.Duration
		Skipped        string `json:"-"`
	}
	backoff := 1500 * time.Millisecond
	b, err := yaml.Marshal(readable(reflect.ValueOf(&limits{MaxConnections: 3, IPFamily: "v4", Idle: time.Hour, Backoff: &backoff, Skipped: "x"})))
	if err != nil {
		t.Fatal(err)
	}
	want := "backoff: 1.5s\nidleTimeout: 1h0m0s\nipFamily: v4\nmaxConnections: 3\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}
