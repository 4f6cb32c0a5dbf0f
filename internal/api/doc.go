// Package api holds the wire types of Arbiter's REST API (/v1): what the
// server accepts and returns, and what the Go client and the CLI send.
// They are plain JSON structs with string enums and string or number GPU
// amounts; conversions to the internal model (workload.Spec, quotas) live
// here so that the server and the CLI agree on them.
//
// Every error answer is an Error: {code, message, field}.
package api
