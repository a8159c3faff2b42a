package translate

// TranslateAll is the test-only oracle (translateAll) for this directory's external tests, which drive the
// engine: a test file cannot be imported, and the oracle must not live in production code.
var TranslateAll = translateAll

// EndpointConditions is endpointConditions, for tests.
var EndpointConditions = endpointConditions
