package lbctl

import "time"

// SetNow fixes the clock ages are measured against, until the returned function restores it.
func SetNow(t time.Time) (restore func()) {
	old := now
	now = func() time.Time { return t }
	return func() { now = old }
}
