package translate

// defaultRouteRetry is the retry of every policy's default route (a policy without spec.routes). The IR is
// not modified once built, and nothing adds to a default route's retry, so one value serves every policy:
// its own copy was 110 bytes of each policy's heap.
var defaultRouteRetry = defaultRetry()
