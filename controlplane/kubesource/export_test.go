package kubesource

// StatusComputations is how many policy statuses the status writers of this process computed so far.
func StatusComputations() int64 { return computations.Load() }
