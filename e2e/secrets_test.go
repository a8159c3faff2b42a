package e2e

import (
	"os"
	"strings"
	"testing"
)

// The push API token and certificate private keys never show up in lbplane's logs (at debug level), in
// lbctl's output, or in error messages.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "s1")
	e := setupWith(t, httpsPolicy, map[string]any{"Certs": certs(""), "B": bs}, bs...)
	waitSynced(t, e.L, 1)
	key, err := os.ReadFile(certs("app.example.com.key"))
	if err != nil {
		t.Fatal(err)
	}
	// A distinctive line from the middle of the private key.
	keyLines := strings.Split(strings.TrimSpace(string(key)), "\n")
	keyLine := keyLines[len(keyLines)/2]

	var outputs []string
	for _, args := range [][]string{{"get", "-o", "yaml"}, {"get", "-o", "json"}, {"get", "https", "-o", "yaml"}, {"status", "-o", "json"}} {
		out, errOut, err := lbctl(t, e.L, "", args...)
		if err != nil {
			t.Fatalf("lbctl %v: %v %s", args, err, errOut)
		}
		outputs = append(outputs, out, errOut)
	}
	// Errors: a wrong token, and a policy whose key does not match its certificate.
	_, errOut, _ := lbctl(t, e.L, "", "--token", "wrong-"+token, "get")
	outputs = append(outputs, errOut)
	mismatched := strings.Replace(string(policy(t, httpsPolicy, map[string]any{"Certs": certs(""), "B": bs, "Port": e.Port})),
		"app.example.com.key", "api.example.com.key", 1)
	_, errOut, err = lbctl(t, e.L, mismatched, "push-config", "-f", "-")
	if err == nil || !strings.Contains(errOut, "private key does not match public key") {
		t.Errorf("a key that does not match its certificate was not refused: %v %s", err, errOut)
	}
	outputs = append(outputs, errOut)
	// The last good version is still served.
	if _, err := httpsClient(t, e.Port).Get("https://app.example.com/"); err != nil {
		t.Errorf("HTTPS stopped after a refused push: %v", err)
	}
	out, errOut, _ := lbctl(t, e.L, "", "translate", "-f", "-")
	outputs = append(outputs, out, errOut)
	translated, _, err := lbctl(t, e.L, string(policy(t, httpsPolicy, map[string]any{"Certs": certs(""), "B": bs, "Port": e.Port})), "translate", "-f", "-")
	if err != nil || !strings.Contains(translated, "[redacted]") {
		t.Errorf("lbctl translate does not redact the private key: %v", err)
	}
	outputs = append(outputs, translated)
	logs, err := os.ReadFile(e.L.log)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(logs))
	for i, o := range outputs {
		if strings.Contains(o, token) {
			t.Errorf("output %d contains the API token:\n%.500s", i, o)
		}
		if strings.Contains(o, keyLine) || strings.Contains(o, "PRIVATE KEY") {
			t.Errorf("output %d contains private key material:\n%.500s", i, o)
		}
	}
	if !strings.Contains(string(logs), "level=DEBUG") {
		t.Error("the log was not written at debug level; the check means little")
	}
}
