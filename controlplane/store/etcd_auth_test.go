package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A record opens at the key it was sealed for, unchanged; moved to another key, altered, cut, sealed
// with another secret key or written without lbplane's MAC, it does not.
func TestRecordAuthentication(t *testing.T) {
	a, err := newRecordAuth(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	other, err := newRecordAuth(bytes.Repeat([]byte{2}, 32))
	if err != nil {
		t.Fatal(err)
	}
	at, v := "/lbplane/policies/default/a", []byte(`{"name":"a"}`)
	sealed := a.seal(at, v)
	if !strings.HasPrefix(sealed, recordMACPrefix) || !strings.HasSuffix(sealed, "\n"+string(v)) {
		t.Errorf("sealed record %q: want the MAC line, then the record as it is", sealed)
	}
	got, err := a.open(at, []byte(sealed))
	if err != nil || !bytes.Equal(got, v) {
		t.Fatalf("open: %q, %v", got, err)
	}
	if got, err := a.open(at, []byte(a.seal(at, nil))); err != nil || len(got) != 0 {
		t.Fatalf("an empty record: %q, %v", got, err)
	}
	for what, c := range map[string]struct {
		at     string
		stored string
	}{
		"moved to another key":     {"/lbplane/policies/default/b", sealed},
		"a key that is a prefix":   {"/lbplane/policies/default/", sealed},
		"altered":                  {at, strings.Replace(sealed, `"a"`, `"b"`, 1)},
		"cut":                      {at, sealed[:len(sealed)-1]},
		"no MAC":                   {at, string(v)},
		"a MAC of another key":     {at, other.seal(at, v)},
		"a MAC that is not base64": {at, recordMACPrefix + "!!!\n" + string(v)},
		"no newline":               {at, recordMACPrefix + "abc"},
		"empty":                    {at, ""},
	} {
		if _, err := a.open(c.at, []byte(c.stored)); !errors.Is(err, errNotLbplanes) {
			t.Errorf("%s: opened (%v)", what, err)
		}
	}
	if _, err := newRecordAuth(nil); err == nil || !strings.Contains(err.Error(), "--etcd-secret-key-file") {
		t.Errorf("no key: %v", err)
	}
}
