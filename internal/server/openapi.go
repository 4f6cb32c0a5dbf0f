package server

import _ "embed"

// openAPI is the OpenAPI 3.1 description served at /v1/openapi.json.
//
//go:embed openapi.json
var openAPI []byte
