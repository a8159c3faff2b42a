package xdscache

// Compared is how many resources delta answers have looked at so far (see compared).
func Compared() int64 { return compared.Load() }
