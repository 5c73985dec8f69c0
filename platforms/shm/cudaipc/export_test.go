package cudaipc

// LastError exposes lastError to the package's external tests.
var LastError = lastError
