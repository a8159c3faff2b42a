package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is lbplane.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// SchemeBuilder registers the API's types.
var SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &LoadBalancerPolicy{}, &LoadBalancerPolicyList{}, &BackendLoadBalancerPolicy{}, &BackendLoadBalancerPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds the API's types to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme
