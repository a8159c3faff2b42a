// Package controlplane holds no code: its subpackages are the lbplane server (sources, translate, ir,
// xdsbuild, xdscache, xdsserver, engine, status, the push API, ...), and layers_test.go holds the module's
// import layering. From the bottom: api, version and atomicfile, which import nothing of lbplane; then
// envoy-bootstrap; then controlplane; then internal (what the commands and the tests use); then the
// commands, benchmarks, tools and end-to-end tests. A package imports only from its own layer or below.
package controlplane
